"""The POPGym envs of ``experiments/popgym`` as tensor envs, every difficulty (Morad et al.,
2023, "POPGym: Benchmarking Partially Observable Reinforcement Learning").

Each family is one module, named for it; :data:`POPGYM_TENSOR_ENVS` makes any of them by the
short name rlmem gives POPGym's env (``RepeatPreviousEasy``): ``POPGYM_TENSOR_ENVS[name](num_envs,
device=...)``. Each equals POPGym's own env step for step from the same state
(``from_reference``), and generates its episodes from the same distribution
(``tests/envs/test_tensor_popgym*``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from rlmem.envs.tensor.popgym.autoencode import Autoencode
from rlmem.envs.tensor.popgym.battleship import Battleship
from rlmem.envs.tensor.popgym.count_recall import CountRecall
from rlmem.envs.tensor.popgym.higher_lower import HigherLower
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv
from rlmem.envs.tensor.popgym.position_only_cartpole import PositionOnlyCartPole
from rlmem.envs.tensor.popgym.position_only_pendulum import PositionOnlyPendulum
from rlmem.envs.tensor.popgym.repeat_first import RepeatFirst
from rlmem.envs.tensor.popgym.repeat_previous import RepeatPrevious

LEVELS = ("Easy", "Medium", "Hard")

DIFFICULTIES: dict[type[PopgymTensorEnv], tuple[dict[str, Any], ...]] = {
    RepeatPrevious: ({"num_decks": 1, "k": 4}, {"num_decks": 2, "k": 32},
                     {"num_decks": 3, "k": 64}),
    RepeatFirst: ({"num_decks": 1}, {"num_decks": 8}, {"num_decks": 16}),
    CountRecall: ({"num_decks": 1, "deck_type": "colors"}, {"num_decks": 2, "deck_type": "suits"},
                  {"num_decks": 4, "deck_type": "ranks"}),
    Autoencode: ({"num_decks": 1}, {"num_decks": 2}, {"num_decks": 3}),
    HigherLower: ({"num_decks": 1}, {"num_decks": 2}, {"num_decks": 3}),
    Battleship: ({"board_size": 8}, {"board_size": 10}, {"board_size": 12}),
    PositionOnlyCartPole: ({"max_episode_length": 200}, {"max_episode_length": 400},
                           {"max_episode_length": 600}),
    PositionOnlyPendulum: ({"max_episode_length": 200}, {"max_episode_length": 150},
                           {"max_episode_length": 100}),
}
"""Each family's constructor arguments at POPGym's Easy, Medium and Hard (its
``<Family><Level>`` classes)."""

POPGYM_TENSOR_ENVS: dict[str, Callable[..., PopgymTensorEnv]] = {
    f"{family.__name__}{level}": partial(family, **arguments)
    for family, levels in DIFFICULTIES.items()
    for level, arguments in zip(LEVELS, levels, strict=True)}
"""The tensor env of each POPGym short name: ``POPGYM_TENSOR_ENVS["RepeatPreviousEasy"](16,
device="cuda")`` is 16 copies of ``popgym-RepeatPreviousEasy-v0``."""

__all__ = ["DIFFICULTIES", "LEVELS", "POPGYM_TENSOR_ENVS", "Autoencode", "Battleship",
           "CountRecall",
           "HigherLower", "PopgymTensorEnv",
           "PositionOnlyCartPole", "PositionOnlyPendulum", "RepeatFirst", "RepeatPrevious"]

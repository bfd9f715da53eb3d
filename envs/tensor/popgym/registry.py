"""The tensor POPGym envs by the short name rlmem gives POPGym's envs: :data:`POPGYM_TENSOR_ENVS`.

Each entry is a :class:`PopgymFactory`, callable as the tensor registry's factories are
(``factory(num_envs, device=..., mission=False, direction=False)``), with the gymnasium id of
the env it reproduces (:attr:`PopgymFactory.id`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from rlmem.envs.tensor.popgym.autoencode import Autoencode
from rlmem.envs.tensor.popgym.battleship import Battleship
from rlmem.envs.tensor.popgym.count_recall import CountRecall
from rlmem.envs.tensor.popgym.higher_lower import HigherLower
from rlmem.envs.tensor.popgym.popgym_env import LEVEL_SUFFIXES, PopgymTensorEnv
from rlmem.envs.tensor.popgym.position_only_cartpole import PositionOnlyCartPole
from rlmem.envs.tensor.popgym.position_only_pendulum import PositionOnlyPendulum
from rlmem.envs.tensor.popgym.repeat_first import RepeatFirst
from rlmem.envs.tensor.popgym.repeat_previous import RepeatPrevious

LEVELS = LEVEL_SUFFIXES[1:]

DIFFICULTIES: dict[type[PopgymTensorEnv], tuple[dict[str, Any], ...]] = {
    RepeatPrevious: ({"num_decks": 1, "k": 4}, {"num_decks": 2, "k": 32},
                     {"num_decks": 3, "k": 64}),
    RepeatFirst: ({"num_decks": 1}, {"num_decks": 8}, {"num_decks": 16}),
    CountRecall: ({"num_decks": 1, "deck_type": "colors"}, {"num_decks": 2, "deck_type": "suits"},
                  {"num_decks": 4, "deck_type": "ranks"}),
    Autoencode: ({"num_decks": 1}, {"num_decks": 2}, {"num_decks": 3}),
    HigherLower: ({"num_decks": 1}, {"num_decks": 2}, {"num_decks": 3}),
    Battleship: tuple({"board_size": size, "ship_sizes": (2, 3, 3, 4)} for size in (8, 10, 12)),
    PositionOnlyCartPole: ({"max_episode_length": 200}, {"max_episode_length": 400},
                           {"max_episode_length": 600}),
    PositionOnlyPendulum: ({"max_episode_length": 200}, {"max_episode_length": 150},
                           {"max_episode_length": 100}),
}
"""Each family's constructor arguments at POPGym's Easy, Medium and Hard (its
``<Family><Level>`` classes; ``tests/envs/test_tensor_popgym_equality.py`` reads them back from
POPGym's envs)."""


@dataclass(frozen=True)
class PopgymFactory:
    """Makes copies of one POPGym env at one difficulty as a tensor env."""

    name: str
    """rlmem's short name, ``RepeatPreviousEasy``."""
    family: type[PopgymTensorEnv]
    """The tensor env's class."""
    arguments: dict[str, Any] = field(default_factory=dict)
    """Its constructor's arguments: the difficulty."""

    @property
    def id(self) -> str:
        """The gymnasium id of POPGym's env, ``popgym-RepeatPreviousEasy-v0``."""
        return f"popgym-{self.name}-v0"

    def __call__(self, num_envs: int, *, device: torch.device | str = "cpu",
                 mission: bool = False, direction: bool = False) -> PopgymTensorEnv:
        """``num_envs`` copies on ``device``.

        Raises:
            ValueError: ``mission`` or ``direction`` is True (MiniGrid's options).
        """
        for key, wanted in (("mission", mission), ("direction", direction)):
            if wanted:
                raise ValueError(f"{key}=true encodes a MiniGrid observation's {key}, but "
                                 f"{self.name} is a POPGym env")
        return self.family(num_envs, device=device, **self.arguments)


POPGYM_TENSOR_ENVS: dict[str, PopgymFactory] = {
    f"{family.__name__}{level}": PopgymFactory(f"{family.__name__}{level}", family, arguments)
    for family, levels in DIFFICULTIES.items()
    for level, arguments in zip(LEVELS, levels, strict=True)}
"""The tensor env of each POPGym short name: ``POPGYM_TENSOR_ENVS["RepeatPreviousEasy"](16,
device="cuda")`` is 16 copies of ``popgym-RepeatPreviousEasy-v0``."""

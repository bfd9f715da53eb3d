"""The POPGym envs of ``experiments/popgym`` as tensor envs, every difficulty (Morad et al.,
2023, "POPGym: Benchmarking Partially Observable Reinforcement Learning").

Each family is one module, named for it; :data:`POPGYM_TENSOR_ENVS` makes any of them by the
short name rlmem gives POPGym's env (``RepeatPreviousEasy``): ``POPGYM_TENSOR_ENVS[name](num_envs,
device=...)``. Each equals POPGym's own env step for step from the same state
(``from_reference``), and generates its episodes from the same distribution
(``tests/envs/test_tensor_popgym*``). :mod:`~rlmem.envs.tensor.popgym.wrappers` gives the
wrappers rlmem's runs put on them.
"""

from rlmem.envs.tensor.popgym.autoencode import Autoencode
from rlmem.envs.tensor.popgym.battleship import Battleship
from rlmem.envs.tensor.popgym.count_recall import CountRecall
from rlmem.envs.tensor.popgym.higher_lower import HigherLower
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv
from rlmem.envs.tensor.popgym.position_only_cartpole import PositionOnlyCartPole
from rlmem.envs.tensor.popgym.position_only_pendulum import PositionOnlyPendulum
from rlmem.envs.tensor.popgym.registry import (
    DIFFICULTIES,
    LEVELS,
    POPGYM_TENSOR_ENVS,
    PopgymFactory,
)
from rlmem.envs.tensor.popgym.repeat_first import RepeatFirst
from rlmem.envs.tensor.popgym.repeat_previous import RepeatPrevious

__all__ = ["DIFFICULTIES", "LEVELS", "POPGYM_TENSOR_ENVS", "Autoencode", "Battleship",
           "CountRecall", "HigherLower", "PopgymFactory", "PopgymTensorEnv",
           "PositionOnlyCartPole", "PositionOnlyPendulum", "RepeatFirst", "RepeatPrevious"]

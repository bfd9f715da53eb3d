"""MiniGrid's envs as tensor envs: the world and its step (:mod:`.env`), the egocentric view
(:mod:`.view`), and the families DoorKey (:mod:`.doorkey`) and Memory (:mod:`.memory`)."""

from rlmem.envs.tensor.minigrid.doorkey import DoorKey
from rlmem.envs.tensor.minigrid.env import MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.fetch import Fetch
from rlmem.envs.tensor.minigrid.memory import Memory

__all__ = ["DoorKey", "Fetch", "Memory", "MiniGridTensorEnv"]

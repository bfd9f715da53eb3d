"""MiniGrid's envs as tensor envs: the world and its step (:mod:`.env`), the egocentric view
(:mod:`.view`), and the families DoorKey (:mod:`.doorkey`), Memory (:mod:`.memory`), Fetch
(:mod:`.fetch`), GoToObject (:mod:`.go_to_object`), GoToDoor (:mod:`.go_to_door`) and
RedBlueDoors (:mod:`.red_blue_doors`). On the CPU the step and the view run in the compiled
loops (``rlmem/cells/_engines/csrc/minigrid.h``), the tensor operations elsewhere."""

from rlmem.envs.tensor.minigrid.doorkey import DoorKey
from rlmem.envs.tensor.minigrid.env import MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.fetch import Fetch
from rlmem.envs.tensor.minigrid.go_to_door import GoToDoor
from rlmem.envs.tensor.minigrid.go_to_object import GoToObject
from rlmem.envs.tensor.minigrid.memory import Memory
from rlmem.envs.tensor.minigrid.red_blue_doors import RedBlueDoors

__all__ = ["DoorKey", "Fetch", "GoToDoor", "GoToObject", "Memory", "MiniGridTensorEnv",
           "RedBlueDoors"]

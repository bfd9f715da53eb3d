"""MiniGrid's DoorKey as tensors: :class:`DoorKey`, ``minigrid.envs.DoorKeyEnv`` for a batch.

A ``size x size`` room walled round, a goal in the bottom-right corner, and a vertical wall at
a random ``x`` with a locked yellow door; the agent and a yellow key on the left of that wall.
The layout, as ``DoorKeyEnv._gen_grid`` draws it (``randint(a, b)`` in ``[a, b)``)::

    split = randint(2, size - 2)                        # the splitting wall's x
    agent = uniform empty cell with x < split           # place_agent(size=(split, size))
    agent_dir = randint(0, 4)
    door_y = randint(1, size - 2)                       # so never at size - 2
    key = uniform empty cell with x < split, not the agent's

Rejection sampling over the left part (``place_obj``) is a uniform draw among its empty cells,
which :func:`rlmem.envs.tensor.random.choose_cell` makes in one step. Episodes last
``max_steps = 10 * size ** 2`` steps unless given.
"""

from __future__ import annotations

from typing import Any

import torch
from minigrid.envs import DoorKeyEnv
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.envs.tensor.minigrid.env import VIEW_SIZE, Layout, MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.objects import (
    CELL_BYTES,
    DOOR,
    GOAL_CELL,
    KEY,
    LOCKED,
    NOTHING,
    WALL_CELL,
    YELLOW,
    code,
    encoding,
    packed,
)
from rlmem.envs.tensor.random import choose_cell, integers

MISSION = "use the key to open the door and then get to the goal"
"""DoorKey's mission (``DoorKeyEnv._gen_mission``)."""

SMALLEST = 5
"""The smallest DoorKey MiniGrid can lay out (the splitting wall needs ``2 <= x < size - 2``)."""


class DoorKey(MiniGridTensorEnv):
    """``num_envs`` DoorKey envs of ``size x size`` cells (the module's docstring).

    Args:
        num_envs: envs.
        size: the room's side, at least :data:`SMALLEST`.
        max_steps: steps before truncation; ``None`` for DoorKey's ``10 * size ** 2``.
        device: where the state lives.
        mission, direction, agent_view_size: as :class:`MiniGridTensorEnv`'s.
    """

    def __init__(self, num_envs: int, size: int = 8, max_steps: int | None = None,
                 device: torch.device | str = "cpu", *, mission: bool = False,
                 direction: bool = False, agent_view_size: int = VIEW_SIZE) -> None:
        if size < SMALLEST:
            raise ValueError(f"DoorKey needs size >= {SMALLEST}, got {size}")
        super().__init__(num_envs, size, size, 10 * size**2 if max_steps is None else max_steps,
                         (MISSION,), 5, device, mission=mission, direction=direction,
                         agent_view_size=agent_view_size)
        self.size = size
        # What depends on the splitting wall's x only, for each x it can take (2 .. size - 3):
        # the walls and the goal, and the empty cells left of the wall.
        x, y = self.coordinates()
        split = torch.arange(2, size - 2, device=self.device).view(-1, 1, 1)
        walls = (x == 0) | (x == size - 1) | (y == 0) | (y == size - 1) | (x == split)
        goal = (x == size - 2) & (y == size - 2)
        grid = encoding(NOTHING, self.device).expand(len(split), size, size, CELL_BYTES)
        grid = torch.where(walls.unsqueeze(-1), encoding(WALL_CELL, self.device), grid)
        self._rooms = torch.where(goal.unsqueeze(-1), encoding(GOAL_CELL, self.device), grid)
        self._left = ((x >= 1) & (x < split) & (y >= 1) & (y <= size - 2)).flatten(1)
        self._door_and_key = torch.tensor([code((DOOR, YELLOW, LOCKED)), code((KEY, YELLOW, 0))],
                                          dtype=torch.int32, device=self.device)

    def _layout(self, draws: Tensor) -> Layout:
        size = self.size
        split = integers(draws[:, 0], 2, size - 2)
        left = self._left[split - 2]
        agent = choose_cell(draws[:, 1], left)
        agent_dir = integers(draws[:, 2], 0, 4)
        door = split * size + integers(draws[:, 3], 1, size - 2)  # cells are x * size + y
        key = choose_cell(draws[:, 4], left.scatter(1, agent[:, None], False))
        grid = self._rooms[split - 2]  # a copy
        packed(grid).flatten(1).scatter_(1, torch.stack((door, key), dim=1),
                                         self._door_and_key.expand(len(split), 2))
        return Layout(grid, torch.stack((agent // size, agent % size), dim=1), agent_dir)

    @classmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        if not isinstance(env, DoorKeyEnv):
            raise ValueError(f"DoorKey.from_reference takes DoorKeyEnv, got {type(env).__name__}")
        return {"size": env.width, "max_steps": env.max_steps}

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
    encoding,
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
                         MISSION, 5, device, mission=mission, direction=direction,
                         agent_view_size=agent_view_size)
        self.size = size

    def _layout(self, draws: Tensor) -> Layout:
        size, device, count = self.size, self.device, draws.shape[0]
        x, y = self.coordinates()
        split = integers(draws[:, 0], 2, size - 2).view(-1, 1, 1)
        left = (x >= 1) & (x < split) & (y >= 1) & (y <= size - 2)  # the left part's empty cells
        agent = choose_cell(draws[:, 1], left.flatten(1))
        agent_dir = integers(draws[:, 2], 0, 4)
        door_y = integers(draws[:, 3], 1, size - 2).view(-1, 1, 1)
        cells = torch.arange(size * size, device=device)
        key = choose_cell(draws[:, 4], left.flatten(1) & (cells != agent[:, None]))
        walls = (x == 0) | (x == size - 1) | (y == 0) | (y == size - 1) | (x == split)
        door = (x == split) & (y == door_y)
        key_cell = (cells == key[:, None]).view(-1, size, size)
        goal = (x == size - 2) & (y == size - 2)
        grid = encoding(NOTHING, device).expand(count, size, size, CELL_BYTES)
        for where, triple in ((walls, WALL_CELL), (goal, GOAL_CELL), (door, (DOOR, YELLOW, LOCKED)),
                              (key_cell, (KEY, YELLOW, 0))):
            grid = torch.where(where.unsqueeze(-1), encoding(triple, device), grid)
        return Layout(grid, torch.stack((agent // size, agent % size), dim=1), agent_dir)

    @classmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        if not isinstance(env, DoorKeyEnv):
            raise ValueError(f"DoorKey.from_reference takes DoorKeyEnv, got {type(env).__name__}")
        return {"size": env.width, "max_steps": env.max_steps}

"""MiniGrid's RedBlueDoors as tensors: :class:`RedBlueDoors`, ``minigrid.envs.RedBlueDoorEnv``
for a batch.

A ``2 size x size`` world walled round, with a ``size x size`` room in its middle (its left
wall at ``x = size // 2``); a closed red door in the room's left wall and a closed blue one in
its right wall. Opening the blue door ends the episode, with reward
``1 - 0.9 * step_count / max_steps`` when the red door was open before the step, 0 otherwise;
opening the red door while the blue one is open ends it with 0 (``RedBlueDoorEnv.step``)::

    if blue open after the step: reward = _reward() if red open before else 0; terminated
    elif red open after the step and blue open before: reward = 0; terminated

The view has MiniGrid's visibility mask. The layout, as ``RedBlueDoorEnv._gen_grid`` draws it
(``randint(a, b)`` in ``[a, b)``)::

    agent = uniform empty cell inside the room; agent_dir = randint(0, 4)
    red door at (size // 2, randint(1, size - 1))
    blue door at (size // 2 + size - 1, randint(1, size - 1))

Episodes last ``max_steps = 20 * size ** 2`` steps unless given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from minigrid.core.constants import COLOR_TO_IDX
from minigrid.envs import RedBlueDoorEnv
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.envs.tensor.minigrid.env import VIEW_SIZE, Layout, MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.objects import CLOSED, DOOR, OPEN, code, packed
from rlmem.envs.tensor.random import choose_cell, integers

MISSION = "open the red door then the blue door"
"""RedBlueDoors' mission (``RedBlueDoorEnv._gen_mission``)."""

SMALLEST = 3
"""The smallest room with a cell inside it."""


class RedBlueDoors(MiniGridTensorEnv):
    """``num_envs`` RedBlueDoors envs of a ``size x size`` room in a ``2 size x size`` world
    (the module's docstring).

    Args:
        num_envs: envs.
        size: the room's side, at least :data:`SMALLEST`.
        max_steps: steps before truncation; ``None`` for RedBlueDoors' ``20 * size ** 2``.
        device: where the state lives.
        mission, direction, agent_view_size: as :class:`MiniGridTensorEnv`'s.

    Besides MiniGrid's world, each env keeps ``red_door`` and ``blue_door``, ``(N,)`` int64:
    the doors' cells, ``x * height + y``.
    """

    def __init__(self, num_envs: int, size: int = 8, max_steps: int | None = None,
                 device: torch.device | str = "cpu", *, mission: bool = False,
                 direction: bool = False, agent_view_size: int = VIEW_SIZE) -> None:
        if size < SMALLEST:
            raise ValueError(f"RedBlueDoors needs size >= {SMALLEST}, got {size}")
        super().__init__(num_envs, 2 * size, size,
                         20 * size**2 if max_steps is None else max_steps, (MISSION,), 4,
                         device, mission=mission, direction=direction,
                         agent_view_size=agent_view_size)
        self.size = size
        self.red_door = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.blue_door = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        x, y = self.coordinates()
        left, right = size // 2, size // 2 + size - 1  # the room's walls
        self._room = self.walls(self.border() | ((x == left) | (x == right)))
        self._inside = ((x > left) & (x < right) & (y >= 1) & (y <= size - 2)).flatten(1)
        self._doors = torch.tensor([code((DOOR, COLOR_TO_IDX[colour], CLOSED))
                                    for colour in ("red", "blue")], dtype=torch.int32,
                                   device=self.device)

    def _layout(self, draws: Tensor) -> Layout:
        size, height, count = self.size, self.height, draws.shape[0]
        agent = choose_cell(draws[:, 0], self._inside.expand(count, -1))
        red = size // 2 * height + integers(draws[:, 2], 1, size - 1)
        blue = (size // 2 + size - 1) * height + integers(draws[:, 3], 1, size - 1)
        grid = self._room.expand(count, -1, -1, -1).clone()
        packed(grid).flatten(1).scatter_(1, torch.stack((red, blue), dim=1),
                                         self._doors.expand(count, 2))
        return Layout(grid, self.position(agent), integers(draws[:, 1], 0, 4),
                      {"red_door": red, "blue_door": blue})

    def _doors_open(self) -> tuple[Tensor, Tensor]:
        """Whether each env's red and blue doors are open.

        Shapes: returns ``(N,)`` bool twice.
        """
        cells = packed(self.grid).flatten(1)
        doors = cells.gather(1, torch.stack((self.red_door, self.blue_door), dim=1))
        is_open = (doors >> 16) == OPEN
        return is_open[:, 0], is_open[:, 1]

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        red_before, blue_before = self._doors_open()
        reward, terminated, truncated = super()._transition(actions)
        red_after, blue_after = self._doors_open()
        ends = blue_after | (red_after & blue_before)
        reward = torch.where(blue_after & red_before, self._success_reward(),
                             torch.where(ends, 0.0, reward))
        return reward, terminated | ends, truncated

    @classmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        if not isinstance(env, RedBlueDoorEnv):
            raise ValueError("RedBlueDoors.from_reference takes RedBlueDoorEnv, got "
                             f"{type(env).__name__}")
        return {"size": env.size, "max_steps": env.max_steps}

    def _copy_family_state(self, envs: Sequence[MiniGridEnv]) -> None:
        cells: dict[str, list[int]] = {"red_door": [], "blue_door": []}
        for env in envs:
            assert isinstance(env, RedBlueDoorEnv)  # from_reference checked it
            for name, door in cells.items():
                # MiniGrid's Grid holds cell (x, y) at y * width + x.
                index = next(i for i, cell in enumerate(env.grid.grid)
                             if cell is getattr(env, name))
                door.append(index % env.width * env.height + index // env.width)
        for name, door in cells.items():
            setattr(self, name, torch.tensor(door, dtype=torch.int64, device=self.device))

"""MiniGrid's GoToDoor as tensors: :class:`GoToDoor`, ``minigrid.envs.GoToDoorEnv`` for a batch.

A room of random width and height (at most ``size``) in the top-left corner of a
``size x size`` world, with a closed door of a different colour in each of its four walls; the
mission names one, and ``done`` next to it ends the episode with reward
``1 - 0.9 * step_count / max_steps``, ``done`` elsewhere and ``toggle`` end it with 0
(:class:`~rlmem.envs.tensor.minigrid.go_to.GoTo`). The view sees through walls. The layout, as
``GoToDoorEnv._gen_grid`` draws it (``randint(a, b)`` in ``[a, b)``)::

    width, height = randint(5, size + 1), randint(5, size + 1)     # the room's walls
    doors = [(randint(2, width - 2), 0), (randint(2, width - 2), height - 1),
             (0, randint(2, height - 2)), (width - 1, randint(2, height - 2))]
    colours = 4 distinct COLOR_NAMES, each drawn again until new
    agent = uniform empty cell inside the room; agent_dir = randint(0, 4)
    target = randint(0, 4)
    mission = f"go to the {colours[target]} door"

Drawing a colour again until it is new is a uniform draw among the colours not used yet:
:func:`rlmem.envs.tensor.random.choose_distinct` over the colours. Episodes last
``max_steps = 4 * size ** 2`` steps unless given.
"""

from __future__ import annotations

from typing import Any

import torch
from minigrid.core.constants import COLOR_NAMES, COLOR_TO_IDX
from minigrid.envs import GoToDoorEnv
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.envs.tensor.minigrid.env import VIEW_SIZE, Layout
from rlmem.envs.tensor.minigrid.go_to import GoTo
from rlmem.envs.tensor.minigrid.objects import CLOSED, DOOR, code, packed
from rlmem.envs.tensor.random import choose_cell, choose_distinct, integers

MISSIONS = tuple(f"go to the {colour} door" for colour in COLOR_NAMES)
"""Every mission (``GoToDoorEnv._gen_mission``), by the target door's colour in
``COLOR_NAMES``."""

SMALLEST = 5
"""The smallest world GoToDoor lays out (MiniGrid asserts ``size >= 5``)."""

DOORS = 4
"""One door per wall: top, bottom, left, right."""


class GoToDoor(GoTo):
    """``num_envs`` GoToDoor envs of ``size x size`` cells (the module's docstring).

    Args:
        num_envs: envs.
        size: the world's side (the room's largest), at least :data:`SMALLEST`.
        max_steps: steps before truncation; ``None`` for GoToDoor's ``4 * size ** 2``.
        device: where the state lives.
        mission, direction, agent_view_size: as :class:`MiniGridTensorEnv`'s.
    """

    def __init__(self, num_envs: int, size: int = 5, max_steps: int | None = None,
                 device: torch.device | str = "cpu", *, mission: bool = False,
                 direction: bool = False, agent_view_size: int = VIEW_SIZE) -> None:
        if size < SMALLEST:
            raise ValueError(f"GoToDoor needs size >= {SMALLEST}, got {size}")
        super().__init__(num_envs, size, size, 4 * size**2 if max_steps is None else max_steps,
                         MISSIONS, 6 + DOORS + 3, device, mission=mission,
                         direction=direction, agent_view_size=agent_view_size)
        self.size = size
        # Every room, width-major: room (width - 5) * (size - 4) + height - 5.
        x, y = self.coordinates()
        sides = torch.arange(SMALLEST, size + 1, device=self.device)
        width = sides.repeat_interleave(len(sides)).view(-1, 1, 1)
        height = sides.repeat(len(sides)).view(-1, 1, 1)
        walls = ((((x == 0) | (x == width - 1)) & (y < height))
                 | (((y == 0) | (y == height - 1)) & (x < width)))
        self._rooms = self.walls(walls)
        self._inside = ((x >= 1) & (x <= width - 2) & (y >= 1) & (y <= height - 2)).flatten(1)
        self._doors = torch.tensor([code((DOOR, COLOR_TO_IDX[colour], CLOSED))
                                    for colour in COLOR_NAMES], dtype=torch.int32,
                                   device=self.device)

    def _layout(self, draws: Tensor) -> Layout:
        size, count = self.size, draws.shape[0]
        width, height = integers(draws[:, 0], 5, size + 1), integers(draws[:, 1], 5, size + 1)
        room = (width - SMALLEST) * (size - SMALLEST + 1) + height - SMALLEST
        zero = torch.zeros_like(width)
        door_x = torch.stack((integers(draws[:, 2], 2, width - 2),
                              integers(draws[:, 3], 2, width - 2), zero, width - 1), dim=1)
        door_y = torch.stack((zero, height - 1, integers(draws[:, 4], 2, height - 2),
                              integers(draws[:, 5], 2, height - 2)), dim=1)
        every_colour = torch.ones(count, len(COLOR_NAMES), dtype=torch.bool, device=self.device)
        colour, _ = choose_distinct(draws[:, 6:6 + DOORS], every_colour)
        grid = self._rooms[room]  # a copy
        packed(grid).flatten(1).scatter_(1, door_x * size + door_y, self._doors[colour])
        rest = draws[:, 6 + DOORS:]
        agent = choose_cell(rest[:, 0], self._inside[room])
        target = integers(rest[:, 2], 0, DOORS)[:, None]
        target_pos = torch.stack((door_x.gather(1, target), door_y.gather(1, target)),
                                 dim=1).squeeze(2)
        return Layout(grid, self.position(agent), integers(rest[:, 1], 0, 4),
                      {"target_pos": target_pos},
                      colour.gather(1, target).squeeze(1))

    @classmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        if not isinstance(env, GoToDoorEnv):
            raise ValueError(f"GoToDoor.from_reference takes GoToDoorEnv, got "
                             f"{type(env).__name__}")
        return {"size": env.width, "max_steps": env.max_steps}

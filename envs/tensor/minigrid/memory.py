"""MiniGrid's Memory as tensors: :class:`Memory`, ``minigrid.envs.MemoryEnv`` for a batch.

A start room with a green cue (a key or a ball) at ``(1, size // 2 - 1)``, a hallway east, and
at its end a split with a key and a ball; walking next to the one matching the cue succeeds
(reward ``1 - 0.9 * step_count / max_steps``), next to the other fails (reward 0), both end the
episode. ``pickup`` acts as ``toggle``. The layout, as ``MemoryEnv._gen_grid`` draws it
(``randint(a, b)`` in ``[a, b)``)::

    hallway_end = randint(4, size - 2) if random_length else size - 3
    agent = (randint(1, hallway_end + 1), size // 2), facing east
    cue = [key, ball][randint(0, 2)]
    ends = [[ball, key], [key, ball]][randint(0, 2)]     # at y = size // 2 - 2 and + 2

The walls (fixed for a given ``hallway_end``): the room's border; the start room's top and
bottom walls at ``x = 1 .. 4``, ``y = size // 2 -+ 2``, and at ``x = 4 .. hallway_end - 1``,
``y = size // 2 -+ 1``; the columns ``x = hallway_end`` (but its middle) and
``x = hallway_end + 2``. Episodes last ``max_steps = 5 * size ** 2`` steps unless given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from minigrid.core.actions import Actions
from minigrid.envs import MemoryEnv
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.envs.tensor.minigrid.env import VIEW_SIZE, Layout, MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.objects import (
    BALL,
    CELL_BYTES,
    GREEN,
    KEY,
    NOTHING,
    WALL_CELL,
    code,
    encoding,
    packed,
)
from rlmem.envs.tensor.random import integers

MISSION = "go to the matching object at the end of the hallway"
"""Memory's mission (``MemoryEnv._gen_mission``)."""

SMALLEST = 7
"""The smallest Memory MiniGrid lays out (odd sizes only)."""


class Memory(MiniGridTensorEnv):
    """``num_envs`` Memory envs of ``size x size`` cells (the module's docstring).

    Args:
        num_envs: envs.
        size: the room's side, odd, at least :data:`SMALLEST`.
        random_length: draw the hallway's length (MiniGrid's ``MemoryS13Random``).
        max_steps: steps before truncation; ``None`` for Memory's ``5 * size ** 2``.
        device: where the state lives.
        mission, direction, agent_view_size: as :class:`MiniGridTensorEnv`'s.

    Besides MiniGrid's world, each env keeps ``success_pos`` and ``failure_pos``, ``(N, 2)``:
    the cells next to the matching and the other end object.
    """

    def __init__(self, num_envs: int, size: int = 7, random_length: bool = False,
                 max_steps: int | None = None, device: torch.device | str = "cpu", *,
                 mission: bool = False, direction: bool = False,
                 agent_view_size: int = VIEW_SIZE) -> None:
        if size < SMALLEST or size % 2 == 0:
            raise ValueError(f"Memory needs an odd size >= {SMALLEST}, got {size}")
        super().__init__(num_envs, size, size, 5 * size**2 if max_steps is None else max_steps,
                         (MISSION,), 4, device, mission=mission, direction=direction,
                         agent_view_size=agent_view_size)
        self.size, self.random_length = size, random_length
        self.success_pos = torch.zeros(num_envs, 2, dtype=torch.int64, device=self.device)
        self.failure_pos = torch.zeros(num_envs, 2, dtype=torch.int64, device=self.device)
        # The walls of each hallway_end it can take (4 .. size - 3), drawn once.
        ends = torch.arange(4, size - 2, device=self.device).view(-1, 1, 1)
        grid = encoding(NOTHING, self.device).expand(len(ends), size, size, CELL_BYTES)
        self._rooms = torch.where(self._walls(ends).unsqueeze(-1),
                                  encoding(WALL_CELL, self.device), grid)

    def _walls(self, hallway_end: Tensor) -> Tensor:
        """Where the walls are, for each layout's ``hallway_end`` (``(k, 1, 1)``).

        Shapes: returns ``(k, size, size)`` bool.
        """
        x, y = self.coordinates()
        middle, size = self.size // 2, self.size
        border = (x == 0) | (x == size - 1) | (y == 0) | (y == size - 1)
        room = (x >= 1) & (x <= 4) & ((y == middle - 2) | (y == middle + 2))
        hallway = (x >= 4) & (x < hallway_end) & ((y == middle - 1) | (y == middle + 1))
        split = ((x == hallway_end) & (y != middle)) | (x == hallway_end + 2)
        return border | room | hallway | split

    def _layout(self, draws: Tensor) -> Layout:
        size, middle, device, count = self.size, self.size // 2, self.device, draws.shape[0]
        fixed = torch.full((count,), size - 3, dtype=torch.int64, device=device)
        hallway_end = integers(draws[:, 0], 4, size - 2) if self.random_length else fixed
        agent_x = integers(draws[:, 1], 1, hallway_end + 1)
        cue_is_ball = integers(draws[:, 2], 0, 2) == 1
        top_is_key = integers(draws[:, 3], 0, 2) == 1  # [[ball, key], [key, ball]][draw]
        grid = self._rooms[hallway_end - 4]  # a copy
        end_x = hallway_end + 1
        cells = torch.stack((torch.full_like(end_x, size + middle - 1),  # cells are x * size + y
                             end_x * size + middle - 2, end_x * size + middle + 2), dim=1)
        key, ball = code((KEY, GREEN, 0)), code((BALL, GREEN, 0))
        is_ball = torch.stack((cue_is_ball, ~top_is_key, top_is_key), dim=1)
        packed(grid).flatten(1).scatter_(1, cells, torch.where(is_ball, ball, key).int())
        top = torch.stack((end_x, torch.full_like(end_x, middle - 1)), dim=1)
        bottom = torch.stack((end_x, torch.full_like(end_x, middle + 1)), dim=1)
        cue_on_top = (cue_is_ball != top_is_key)[:, None]
        agent = torch.stack((agent_x, torch.full_like(agent_x, middle)), dim=1)
        return Layout(grid, agent, torch.zeros_like(agent_x),
                      {"success_pos": torch.where(cue_on_top, top, bottom),
                       "failure_pos": torch.where(cue_on_top, bottom, top)})

    def _actions(self, actions: Tensor) -> Tensor:
        actions = actions.to(torch.int64)
        return torch.where(actions == Actions.pickup, int(Actions.toggle), actions)

    def _outcome(self, action: Tensor, reward: Tensor, terminated: Tensor
                 ) -> tuple[Tensor, Tensor]:
        success = (self.agent_pos == self.success_pos).all(dim=1)
        failure = (self.agent_pos == self.failure_pos).all(dim=1)
        reward = torch.where(success, self._success_reward(),
                             torch.where(failure, 0.0, reward))
        return reward, terminated | success | failure

    @classmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        if not isinstance(env, MemoryEnv):
            raise ValueError(f"Memory.from_reference takes MemoryEnv, got {type(env).__name__}")
        return {"size": env.width, "random_length": env.random_length,
                "max_steps": env.max_steps}

    def _copy_family_state(self, envs: Sequence[MiniGridEnv]) -> None:
        for name in ("success_pos", "failure_pos"):
            positions = np.array([getattr(env, name) for env in envs], dtype=np.int64)
            setattr(self, name, torch.as_tensor(positions, device=self.device))

"""MiniGrid's Fetch as tensors: :class:`Fetch`, ``minigrid.envs.FetchEnv`` for a batch.

A ``size x size`` room walled round with ``num_objs`` keys and balls of random colours (two may
be alike); the mission names one of them, and picking up an object ends the episode, with
reward ``1 - 0.9 * step_count / max_steps`` when it is of the mission's type and colour, 0
otherwise. The view sees through walls. The layout, as ``FetchEnv._gen_grid`` draws it
(``randint(a, b)`` in ``[a, b)``)::

    for each of num_objs objects:
        type = ["key", "ball"][randint(0, 2)]
        colour = COLOR_NAMES[randint(0, 6)]
        cell = uniform empty cell of the room              # place_obj
    agent = uniform empty cell; agent_dir = randint(0, 4)  # place_agent
    target = objects[randint(0, num_objs)]
    mission = f"{SYNTAX[randint(0, 5)]} {target's colour} {target's type}"

Rejection sampling over the room (``place_obj``, then ``place_agent``) is a uniform draw among
its empty cells, one cell after another, which :func:`rlmem.envs.tensor.random.choose_distinct`
makes. Episodes last ``max_steps = 5 * size ** 2`` steps unless given.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch
from minigrid.core.constants import COLOR_NAMES, COLOR_TO_IDX, OBJECT_TO_IDX
from minigrid.envs import FetchEnv
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.envs.tensor.minigrid.env import VIEW_SIZE, Layout, MiniGridTensorEnv, check_objects
from rlmem.envs.tensor.minigrid.objects import (
    NOTHING_CODE,
    code,
    packed,
)
from rlmem.envs.tensor.random import choose_distinct, integers

SYNTAX = ("get a", "go get a", "fetch a", "go fetch a", "you must fetch a")
"""The mission's openings (``FetchEnv.__init__``'s ``MISSION_SYNTAX``)."""

TYPES = ("key", "ball")
"""The objects' types (``FetchEnv.obj_types``)."""

MISSIONS = tuple(f"{syntax} {colour} {kind}"
                 for syntax, colour, kind in itertools.product(SYNTAX, COLOR_NAMES, TYPES))
"""Every mission (``FetchEnv._gen_mission``), indexed ``(syntax * 6 + colour) * 2 + type`` by
the positions in :data:`SYNTAX`, ``COLOR_NAMES`` and :data:`TYPES`."""


class Fetch(MiniGridTensorEnv):
    """``num_envs`` Fetch envs of ``size x size`` cells with ``num_objs`` objects (the module's
    docstring).

    Args:
        num_envs: envs.
        size: the room's side.
        num_objs: objects in the room (MiniGrid's ``numObjs``), at least 1 and at most the free
            cells but one (:func:`~rlmem.envs.tensor.minigrid.env.check_objects`).
        max_steps: steps before truncation; ``None`` for Fetch's ``5 * size ** 2``.
        device: where the state lives.
        mission, direction, agent_view_size: as :class:`MiniGridTensorEnv`'s.

    Besides MiniGrid's world, each env keeps ``target``, ``(N,)`` int32: the packed cell
    (:func:`~rlmem.envs.tensor.minigrid.objects.packed`) of the object to fetch.
    """

    see_through_walls = True

    def __init__(self, num_envs: int, size: int = 8, num_objs: int = 3,
                 max_steps: int | None = None, device: torch.device | str = "cpu", *,
                 mission: bool = False, direction: bool = False,
                 agent_view_size: int = VIEW_SIZE) -> None:
        check_objects("Fetch", size, num_objs, most=(size - 2) ** 2)
        super().__init__(num_envs, size, size, 5 * size**2 if max_steps is None else max_steps,
                         MISSIONS, 3 * num_objs + 4, device, mission=mission,
                         direction=direction, agent_view_size=agent_view_size)
        self.size, self.num_objs = size, num_objs
        self.target = torch.zeros(num_envs, dtype=torch.int32, device=self.device)
        self._room, self._free = self.walls(self.border()), ~self.border().flatten(1)
        # The packed cell of each (type, colour) by their positions in TYPES and COLOR_NAMES.
        self._objects = torch.tensor(
            [[code((OBJECT_TO_IDX[kind], COLOR_TO_IDX[colour], 0)) for colour in COLOR_NAMES]
             for kind in TYPES], dtype=torch.int32, device=self.device)

    def _layout(self, draws: Tensor) -> Layout:
        count, objects = draws.shape[0], self.num_objs
        kind = integers(draws[:, :objects], 0, len(TYPES))
        colour = integers(draws[:, objects:2 * objects], 0, len(COLOR_NAMES))
        placed = self._objects[kind, colour]  # (k, num_objs) packed cells
        # the objects' cells, then the agent's (place_agent: an empty cell, after them)
        cells, _ = choose_distinct(draws[:, 2 * objects:3 * objects + 1],
                                   self._free.expand(count, -1))
        grid = self._room.expand(count, -1, -1, -1).clone()
        packed(grid).flatten(1).scatter_(1, cells[:, :objects], placed)
        rest = draws[:, 3 * objects + 1:]
        target = integers(rest[:, 1], 0, objects)[:, None]
        syntax = integers(rest[:, 2], 0, len(SYNTAX))
        mission = ((syntax * len(COLOR_NAMES) + colour.gather(1, target).squeeze(1))
                   * len(TYPES) + kind.gather(1, target).squeeze(1))
        return Layout(grid, self.position(cells[:, objects]), integers(rest[:, 0], 0, 4),
                      {"target": placed.gather(1, target).squeeze(1)}, mission)

    def _outcome(self, action: Tensor, reward: Tensor, terminated: Tensor
                 ) -> tuple[Tensor, Tensor]:
        carried = packed(self.carrying)
        holding = carried != NOTHING_CODE
        reward = torch.where(holding & (carried == self.target), self._success_reward(),
                             torch.where(holding, 0.0, reward))
        return reward, terminated | holding

    @classmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        if not isinstance(env, FetchEnv):
            raise ValueError(f"Fetch.from_reference takes FetchEnv, got {type(env).__name__}")
        return {"size": env.width, "num_objs": env.numObjs, "max_steps": env.max_steps}

    def _copy_family_state(self, envs: Sequence[MiniGridEnv]) -> None:
        targets = []
        for env in envs:
            assert isinstance(env, FetchEnv)  # from_reference checked it
            targets.append(code((OBJECT_TO_IDX[env.targetType], COLOR_TO_IDX[env.targetColor],
                                 0)))
        self.target = torch.tensor(targets, dtype=torch.int32, device=self.device)

"""MiniGrid's GoToObject as tensors: :class:`GoToObject`, ``minigrid.envs.GoToObjectEnv`` for a
batch.

A ``size x size`` room walled round with ``num_objs`` distinct objects (keys, balls and boxes of
random colours, no two alike); the mission names one, and ``done`` next to it ends the episode
with reward ``1 - 0.9 * step_count / max_steps``, ``done`` elsewhere and ``toggle`` end it with
0 (:class:`~rlmem.envs.tensor.minigrid.go_to.GoTo`). The view sees through walls. The layout,
as ``GoToObjectEnv._gen_grid`` draws it (``randint(a, b)`` in ``[a, b)``)::

    while fewer than num_objs objects:
        type, colour = ["key", "ball", "box"][randint(0, 3)], COLOR_NAMES[randint(0, 6)]
        if (type, colour) is placed already: draw again
        cell = uniform empty cell of the room              # place_obj
    agent = uniform empty cell; agent_dir = randint(0, 4)  # place_agent
    target = objects[randint(0, num_objs)]
    mission = f"go to the {target's colour} {target's type}"

Drawing again until the pair is new is a uniform draw among the pairs not placed yet, and
``place_obj`` and ``place_agent`` draw uniformly among the cells still empty: both are
:func:`rlmem.envs.tensor.random.choose_distinct`'s. Episodes last
``max_steps = 5 * size ** 2`` steps unless given.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from minigrid.core.constants import COLOR_NAMES, COLOR_TO_IDX, OBJECT_TO_IDX
from minigrid.envs import GoToObjectEnv
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.envs.tensor.minigrid.env import VIEW_SIZE, Layout, check_objects
from rlmem.envs.tensor.minigrid.go_to import GoTo
from rlmem.envs.tensor.minigrid.objects import code, packed
from rlmem.envs.tensor.random import choose_distinct, integers

TYPES = ("key", "ball", "box")
"""The objects' types (``GoToObjectEnv._gen_grid``'s ``types``)."""

PAIRS = tuple(itertools.product(COLOR_NAMES, TYPES))
"""Every (colour, type) an object can have; an object is drawn as its index here."""

MISSIONS = tuple(f"go to the {colour} {kind}" for colour, kind in PAIRS)
"""Every mission (``GoToObjectEnv._gen_mission``), the target's index in :data:`PAIRS`."""


class GoToObject(GoTo):
    """``num_envs`` GoToObject envs of ``size x size`` cells with ``num_objs`` objects (the
    module's docstring).

    Args:
        num_envs: envs.
        size: the room's side.
        num_objs: objects in the room (MiniGrid's ``numObjs``), at least 1, at most the 18
            (colour, type) pairs and the free cells but one
            (:func:`~rlmem.envs.tensor.minigrid.env.check_objects`).
        max_steps: steps before truncation; ``None`` for GoToObject's ``5 * size ** 2``.
        device: where the state lives.
        mission, direction, agent_view_size: as :class:`MiniGridTensorEnv`'s.
    """

    def __init__(self, num_envs: int, size: int = 6, num_objs: int = 2,
                 max_steps: int | None = None, device: torch.device | str = "cpu", *,
                 mission: bool = False, direction: bool = False,
                 agent_view_size: int = VIEW_SIZE) -> None:
        check_objects("GoToObject", size, num_objs, most=len(PAIRS))
        super().__init__(num_envs, size, size, 5 * size**2 if max_steps is None else max_steps,
                         MISSIONS, 2 * num_objs + 3, device, mission=mission,
                         direction=direction, agent_view_size=agent_view_size)
        self.size, self.num_objs = size, num_objs
        self._room, self._free = self.walls(self.border()), ~self.border().flatten(1)
        self._objects = torch.tensor(
            [code((OBJECT_TO_IDX[kind], COLOR_TO_IDX[colour], 0)) for colour, kind in PAIRS],
            dtype=torch.int32, device=self.device)

    def _layout(self, draws: Tensor) -> Layout:
        count, objects = draws.shape[0], self.num_objs
        every_pair = torch.ones(count, len(PAIRS), dtype=torch.bool, device=self.device)
        pair, _ = choose_distinct(draws[:, :objects], every_pair)
        # the objects' cells, then the agent's (place_agent: an empty cell, after them)
        cells, _ = choose_distinct(draws[:, objects:2 * objects + 1],
                                   self._free.expand(count, -1))
        grid = self._room.expand(count, -1, -1, -1).clone()
        packed(grid).flatten(1).scatter_(1, cells[:, :objects], self._objects[pair])
        rest = draws[:, 2 * objects + 1:]
        target = integers(rest[:, 1], 0, objects)[:, None]
        return Layout(grid, self.position(cells[:, objects]), integers(rest[:, 0], 0, 4),
                      {"target_pos": self.position(cells.gather(1, target).squeeze(1))},
                      pair.gather(1, target).squeeze(1))

    @classmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        if not isinstance(env, GoToObjectEnv):
            raise ValueError("GoToObject.from_reference takes GoToObjectEnv, got "
                             f"{type(env).__name__}")
        return {"size": env.width, "num_objs": env.numObjs, "max_steps": env.max_steps}

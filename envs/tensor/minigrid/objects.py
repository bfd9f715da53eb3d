"""MiniGrid's world objects as their encodings: what each cell holds is MiniGrid's own
``(object, colour, state)`` triple (``WorldObj.encode``), and what an object does (can the agent
walk onto it, see past it, pick it up) is a function of that triple, for a whole batch at once.

A cell is stored as :data:`CELL_BYTES` bytes, the triple and a zero, so that a batch of cells
``(..., 4)`` uint8 reads as one int32 each (:func:`packed`): the view gathers and selects one
number per cell. The bytes are read little-endian (object in the low byte), as on every
platform torch runs on.

The rules are those of ``minigrid.core.world_object`` (MiniGrid 3):

========  ============  ============  ===========
object    can_overlap   see_behind    can_pickup
========  ============  ============  ===========
empty     yes           yes           no
wall      no            no            no
floor     yes           yes           no
door      if open       if open       no
key       no            yes           yes
ball      no            yes           yes
box       no            yes           yes
goal      yes           yes           no
lava      yes           yes           no
========  ============  ============  ===========
"""

from __future__ import annotations

import torch
from minigrid.core.actions import Actions
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX
from torch import Tensor

EMPTY = OBJECT_TO_IDX["empty"]
WALL = OBJECT_TO_IDX["wall"]
FLOOR = OBJECT_TO_IDX["floor"]
DOOR = OBJECT_TO_IDX["door"]
KEY = OBJECT_TO_IDX["key"]
BALL = OBJECT_TO_IDX["ball"]
BOX = OBJECT_TO_IDX["box"]
GOAL = OBJECT_TO_IDX["goal"]
LAVA = OBJECT_TO_IDX["lava"]

OPEN = STATE_TO_IDX["open"]
CLOSED = STATE_TO_IDX["closed"]
LOCKED = STATE_TO_IDX["locked"]

GREY = COLOR_TO_IDX["grey"]
GREEN = COLOR_TO_IDX["green"]
YELLOW = COLOR_TO_IDX["yellow"]

CELL_BYTES = 4
"""Bytes per stored cell: object, colour, state, and a zero."""

NOTHING = (EMPTY, 0, 0)
"""The encoding of an empty cell (MiniGrid's ``None``), and of carrying nothing."""
WALL_CELL = (WALL, GREY, 0)
"""A grey wall: what MiniGrid's view shows beyond the world's edge."""
GOAL_CELL = (GOAL, GREEN, 0)
"""MiniGrid's ``Goal()``."""


def encoding(triple: tuple[int, int, int], device: torch.device) -> Tensor:
    """One cell as stored: its encoding and a zero byte.

    Shapes: returns ``(4,)`` uint8.
    """
    return torch.tensor((*triple, 0), dtype=torch.uint8, device=device)


def code(triple: tuple[int, int, int]) -> int:
    """One cell's :func:`packed` number."""
    kind, colour, state = triple
    return kind | colour << 8 | state << 16


WALL_CODE = code(WALL_CELL)
"""A grey wall, packed."""


def packed(cells: Tensor) -> Tensor:
    """Stored cells as one int32 each (a view, no copy).

    Shapes: ``(..., 4)`` uint8 -> ``(...)`` int32.
    """
    return cells.view(torch.int32).squeeze(-1)


def unpacked(codes: Tensor) -> Tensor:
    """Packed cells as MiniGrid's encodings (a copy).

    Shapes: ``(...)`` int32 -> ``(..., 3)`` uint8.
    """
    return codes.unsqueeze(-1).view(torch.uint8)[..., :3].contiguous()


NOTHING_CODE = code(NOTHING)
"""An empty cell, packed."""

KERNEL_CODES = torch.tensor([EMPTY, WALL, FLOOR, DOOR, KEY, BALL, BOX, GOAL, LAVA, OPEN, CLOSED,
                             LOCKED, Actions.forward, Actions.pickup, Actions.drop, Actions.toggle,
                             NOTHING_CODE, WALL_CODE])
"""MiniGrid's indices as the compiled step and view read them (``MiniGridCodes`` in
``rlmem/cells/_engines/csrc/minigrid.h``, in its order), so that they are written once, here."""


def can_overlap(codes: Tensor) -> Tensor:
    """Whether the agent can walk onto each (packed) cell (``WorldObj.can_overlap``).

    Shapes: ``(...)`` int32 -> ``(...)`` bool.
    """
    kind = codes & 0xFF
    return ((kind == EMPTY) | (kind == FLOOR) | (kind == GOAL) | (kind == LAVA)
            | ((kind == DOOR) & ((codes >> 16) == OPEN)))


def can_pickup(codes: Tensor) -> Tensor:
    """Whether the agent can pick up each (packed) cell's object (``WorldObj.can_pickup``).

    Shapes: ``(...)`` int32 -> ``(...)`` bool.
    """
    kind = codes & 0xFF
    return (kind == KEY) | (kind == BALL) | (kind == BOX)


def see_behind(codes: Tensor) -> Tensor:
    """Whether the agent sees past each (packed) cell (``WorldObj.see_behind``): all but walls
    and doors that are not open.

    Shapes: ``(...)`` int32 -> ``(...)`` bool.
    """
    kind, state = codes & 0xFF, (codes >> 16) & 0xFF
    return ~((kind == WALL) | ((kind == DOOR) & (state != OPEN)))

"""MiniGrid's egocentric view read straight from the world's grid: the array
``MiniGridEnv.gen_obs()["image"]`` gives, without the grids MiniGrid builds to make it.

MiniGrid makes every observation by copying the view's square out of the world into a new
:class:`~minigrid.core.grid.Grid`, rotating it by a new ``Grid`` per quarter turn (one to four),
sweeping it for the cells hidden behind walls (``Grid.process_vis``) and encoding what is
visible: about 90% of a DoorKey or MemoryS7 step (``benchmarks/minigrid_view.py``). The same
array follows from index arithmetic: cell ``(i, j)`` of the rotated view shows one cell of the
world, fixed by the agent's direction and the view's corner (:func:`view_offsets`).
:func:`egocentric_image` looks each cell up once, runs MiniGrid's own visibility sweep over them
(same order, same rule), and encodes the visible ones, the carried object at the agent's cell,
as MiniGrid does.

It is MiniGrid's observation, element for element: ``tests/envs/test_minigrid_view.py``
compares the two over random walks through many MiniGrid and BabyAI envs, every direction,
doors open and shut, objects carried, views of 3, 7 and 11 cells, and a run's ``progress.csv`` is
unchanged bit for bit (``tests/agents/test_ppo_sync_fixture.py``). :func:`use_direct_view`
installs it on an env (:func:`rlmem.envs.make_env` does so for every MiniGrid env) unless the
env's class makes its observations its own way.

It asks the world's objects themselves what they show (``encode``) and whether they hide what
is behind them (``see_behind``), so custom objects work; it does not call ``Grid.slice``,
``rotate_left``, ``process_vis`` or ``encode``, so a change made to those methods is not seen.
``MiniGridEnv.gen_obs(env)`` still gives MiniGrid's own observation of any env.
"""

from __future__ import annotations

import functools
from itertools import chain
from typing import Any

import minigrid
import numpy as np
from minigrid.core.constants import OBJECT_TO_IDX
from minigrid.core.grid import Grid
from minigrid.core.world_object import Wall, WorldObj
from minigrid.minigrid_env import MiniGridEnv

__all__ = ["egocentric_image", "use_direct_view", "view_offsets"]

SUPPORTED_MAJOR = "3"
"""The MiniGrid major version whose ``gen_obs`` this reproduces (and the tests compare with);
under another, envs keep MiniGrid's own."""

_EMPTY = (OBJECT_TO_IDX["empty"], 0, 0)
"""How MiniGrid encodes a visible cell that holds nothing."""
_UNSEEN = (0, 0, 0)
"""How MiniGrid encodes a cell the agent cannot see (``unseen``, index 0)."""
_OUTSIDE = Wall()
"""What a view shows beyond the world's edge (``Grid.slice`` puts a grey wall there)."""


@functools.cache
def view_offsets(size: int, direction: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Which world cell each cell of the agent's view shows.

    ``view_offsets(size, direction)[i][j]`` is the offset ``(dx, dy)`` from the view's corner
    (``MiniGridEnv.get_view_exts``' ``topX, topY``) of the world cell at column ``i``, row ``j``
    of the view, after MiniGrid turns the square it sliced out ``direction + 1`` times to the
    left (``Grid.rotate_left``: the cell at ``(a, b)`` moves to ``(b, size - 1 - a)``). The
    agent's cell is ``(size // 2, size - 1)``.
    """
    # offsets[i][j] before any turn: the slice's own cell (i, j)
    offsets = [[(i, j) for j in range(size)] for i in range(size)]
    for _ in range(direction + 1):
        turned = [[(0, 0)] * size for _ in range(size)]
        for a in range(size):
            for b in range(size):
                turned[b][size - 1 - a] = offsets[a][b]
        offsets = turned
    return tuple(tuple(column) for column in offsets)


@functools.cache
def view_lines(size: int, direction: int) -> tuple[tuple[int, int, int, int], ...]:
    """:func:`view_offsets` one column at a time: each column of the view shows a straight line
    of the world, ``(dx, dy, sx, sy)``: its first cell's offset from the view's corner and the
    step ``(sx, sy)`` (one of ``(±1, 0)``, ``(0, ±1)``) from one row of the view to the next."""
    lines = []
    for column in view_offsets(size, direction):
        (dx, dy), (x1, y1) = column[0], column[1]
        sx, sy = x1 - dx, y1 - dy
        assert all(offset == (dx + j * sx, dy + j * sy) for j, offset in enumerate(column))
        lines.append((dx, dy, sx, sy))
    return tuple(lines)


def _line(cells: list[WorldObj | None], first: int, stride: int, start: int, step: int,
          length: int, size: int) -> list[WorldObj | None]:
    """The ``size`` cells ``start + k * step`` (``k = 0 .. size - 1``, ``step`` ±1) of the
    world's line of ``length`` cells whose cell ``p`` is ``cells[first + p * stride]``, with
    :data:`_OUTSIDE` for positions off the line."""
    if step == 1:
        low, high = max(0, -start), min(size - 1, length - 1 - start)
        begin = start + low
    else:
        low, high = max(0, start - length + 1), min(size - 1, start)
        begin = start - high
    if low > high:
        return [_OUTSIDE] * size
    inside = cells[first + begin * stride: first + (begin + high - low) * stride + 1: stride]
    if step == -1:
        inside.reverse()
    return [_OUTSIDE] * low + inside + [_OUTSIDE] * (size - 1 - high)


def _view_column(grid: Grid, x: int, y: int, sx: int, sy: int, size: int
                 ) -> list[WorldObj | None]:
    """The ``size`` cells of ``grid`` from ``(x, y)`` on in steps of ``(sx, sy)``, along a row
    of the world (``sy == 0``) or a column, :data:`_OUTSIDE` where they leave it."""
    if sy == 0:
        if not 0 <= y < grid.height:
            return [_OUTSIDE] * size
        return _line(grid.grid, y * grid.width, 1, x, sx, grid.width, size)
    if not 0 <= x < grid.width:
        return [_OUTSIDE] * size
    return _line(grid.grid, x, grid.width, y, sy, grid.height, size)


def _visible(view: list[list[WorldObj | None]], size: int) -> list[list[bool]]:
    """MiniGrid's ``Grid.process_vis`` over ``view`` (columns of cells): from the agent's cell
    at the bottom middle, row by row upwards, sight spreads right then left past every cell
    that is empty or can be seen behind (an open door), and one row up from each."""
    mask = [[False] * size for _ in range(size)]
    mask[size // 2][size - 1] = True
    for j in reversed(range(size)):
        for i in range(size - 1):
            cell = view[i][j]
            if not mask[i][j] or (cell is not None and not cell.see_behind()):
                continue
            mask[i + 1][j] = True
            if j > 0:
                mask[i + 1][j - 1] = True
                mask[i][j - 1] = True
        for i in reversed(range(1, size)):
            cell = view[i][j]
            if not mask[i][j] or (cell is not None and not cell.see_behind()):
                continue
            mask[i - 1][j] = True
            if j > 0:
                mask[i - 1][j - 1] = True
                mask[i][j - 1] = True
    return mask


def egocentric_image(env: MiniGridEnv) -> np.ndarray:
    """``env.gen_obs()["image"]`` as MiniGrid computes it, read from ``env.grid`` directly.

    Shapes:
        - returns ``(size, size, 3)`` uint8, ``size`` the env's ``agent_view_size``: the
          (object, colour, state) index of each cell of the view, column-major as MiniGrid's
          ``Grid.encode`` (``[i, j]``: column ``i``, row ``j``, the agent at
          ``[size // 2, size - 1]``)
    """
    size = env.agent_view_size
    top_x, top_y, _, _ = env.get_view_exts()
    view = [_view_column(env.grid, top_x + dx, top_y + dy, sx, sy, size)
            for dx, dy, sx, sy in view_lines(size, env.agent_dir)]
    mask = (_visible(view, size) if not env.see_through_walls
            else [[True] * size for _ in range(size)])
    # the agent sees what it carries at its own cell (whatever the world holds there)
    view[size // 2][size - 1] = env.carrying if env.carrying else None
    codes = [(cell.encode() if cell is not None else _EMPTY) if seen else _UNSEEN
             for column, seen_column in zip(view, mask, strict=True)
             for cell, seen in zip(column, seen_column, strict=True)]
    return np.frombuffer(bytearray(chain.from_iterable(codes)), dtype=np.uint8).reshape(
        size, size, 3)


class _DirectView:
    """``env.gen_obs`` of an env with the direct view: ``MiniGridEnv.gen_obs`` with the image
    from :func:`egocentric_image`, where the world is MiniGrid's own ``Grid`` (a grid of another
    class gets MiniGrid's path). An object, not a bound function, so that the env still
    pickles and copies."""

    def __init__(self, env: MiniGridEnv) -> None:
        self.env = env

    def __call__(self) -> dict[str, Any]:
        env = self.env
        if type(env.grid) is not Grid:
            return MiniGridEnv.gen_obs(env)
        return {"image": egocentric_image(env), "direction": env.agent_dir,
                "mission": env.mission}


def use_direct_view(env: MiniGridEnv) -> bool:
    """Make ``env``'s observations with :func:`egocentric_image` (on this instance only).

    Left as it is, returning False, where the env's class makes its observations its own way
    (it overrides ``gen_obs`` or ``gen_obs_grid``) or the installed MiniGrid is not of the
    major version this reproduces (:data:`SUPPORTED_MAJOR`).
    """
    cls = type(env)
    if (minigrid.__version__.split(".")[0] != SUPPORTED_MAJOR
            or cls.gen_obs is not MiniGridEnv.gen_obs
            or cls.gen_obs_grid is not MiniGridEnv.gen_obs_grid):
        return False
    env.gen_obs = _DirectView(env)  # type: ignore[method-assign]
    return True

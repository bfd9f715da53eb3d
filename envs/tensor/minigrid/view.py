"""MiniGrid's egocentric view of a batch of worlds: ``MiniGridEnv.gen_obs()["image"]`` for every
env at once.

The view's cell ``(i, j)`` (column ``i``, row ``j``, the agent at ``(size // 2, size - 1)``)
shows the world cell ``agent_pos + offset[dir][i][j]``, an offset fixed by the agent's direction
(MiniGrid's ``get_view_exts`` corner plus :func:`rlmem.envs.minigrid_view.view_offsets`, the
turns of ``Grid.rotate_left``); beyond the world's edge it shows a grey wall (``Grid.slice``).

Which cells are seen is MiniGrid's ``Grid.process_vis`` (``see_through_walls=False``). Its
reference loop, from the agent's cell upwards, one row ``j`` at a time::

    mask[size // 2][size - 1] = True
    for j in reversed(range(size)):
        for i in range(size - 1):                      # sight spreads right ...
            if mask[i][j] and see_behind(view[i][j]):
                mask[i + 1][j] = True
                if j > 0: mask[i + 1][j - 1] = mask[i][j - 1] = True
        for i in reversed(range(1, size)):             # ... then left
            if mask[i][j] and see_behind(view[i][j]):
                mask[i - 1][j] = True
                if j > 0: mask[i - 1][j - 1] = mask[i][j - 1] = True

Within a row, a cell ends up seen iff it was marked from below or a seen cell next to it in the
row lets sight through: the row's marks spread through runs of see-through cells (each run
reaching the first opaque cell beyond it) in both directions. That is what :func:`_spread`
computes with two running maxima of indices, for every env at once. The row above is then
marked at, and beside, every seen see-through cell of this row. So the loop runs over the
``size`` rows of the view only, never over envs or cells. For views of up to
:data:`TABLE_VIEW` cells across, the row's outcome (seen cells, marks of the row above) is
looked up instead, in a table :func:`_spread` fills once for every pair of ``size``-bit masks
(marked, see-through): one lookup per row.

Cells are handled as MiniGrid's ``(object, colour, state)`` bytes plus a zero byte, read as one
int32 (:data:`rlmem.envs.tensor.minigrid.objects.CELL_BYTES`), so a view gathers one number
per cell.

Every visible cell shows its encoding, an unseen one ``(0, 0, 0)``, and the agent's own cell
what the agent carries (``(1, 0, 0)``, empty, when nothing): MiniGrid's ``Grid.encode`` of the
view with the visibility mask.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from rlmem.cells._engines import compiled
from rlmem.envs.minigrid_view import view_offsets
from rlmem.envs.tensor.minigrid.objects import (
    KERNEL_CODES,
    WALL_CODE,
    packed,
    see_behind,
    unpacked,
)

DIRECTIONS = 4
"""MiniGrid's agent directions: 0 east, 1 south, 2 west, 3 north."""


TABLE_VIEW = 9
"""The widest view whose visibility is looked up in a table (``2 ** (2 * size)`` rows)."""


@functools.cache
def _view_table(size: int, device: torch.device) -> Tensor:
    """``table[dir, i, j]``: the world offset ``(dx, dy)`` from the agent of view cell
    ``(i, j)`` when the agent faces ``dir``.

    Shapes: returns ``(4, size, size, 2)`` int64.
    """
    half = size // 2
    # MiniGrid's get_view_exts: the view's corner, relative to the agent, per direction
    corners = ((0, -half), (-half, 0), (-size + 1, -half), (-half, -size + 1))
    table = [[[(cx + dx, cy + dy) for dx, dy in column]
              for column in view_offsets(size, direction)]
             for direction, (cx, cy) in enumerate(corners)]
    return torch.tensor(table, dtype=torch.int64, device=device)


def view_cells(grid: Tensor, agent_pos: Tensor, agent_dir: Tensor, size: int) -> Tensor:
    """What each cell of every env's view holds, seen or not (grey walls beyond the edge), as
    packed cells (:func:`~rlmem.envs.tensor.minigrid.objects.packed`).

    Shapes:
        - ``grid``: ``(N, W, H, 4)`` uint8; ``agent_pos``: ``(N, 2)`` int64 (x, y);
          ``agent_dir``: ``(N,)`` int64
        - returns ``(N, size, size)`` int32, ``[n, i, j]`` view column ``i``, row ``j``
    """
    num_envs, width, height, _ = grid.shape
    offsets = _view_table(size, grid.device)[agent_dir]  # (N, size, size, 2)
    x = agent_pos[:, 0, None, None] + offsets[..., 0]
    y = agent_pos[:, 1, None, None] + offsets[..., 1]
    inside = (x >= 0) & (x < width) & (y >= 0) & (y < height)
    flat = (x.clamp(0, width - 1) * height + y.clamp(0, height - 1)).reshape(num_envs, -1)
    cells = packed(grid).reshape(num_envs, -1).gather(1, flat).reshape(num_envs, size, size)
    return torch.where(inside, cells, WALL_CODE)


def _spread(marked: Tensor, clear: Tensor) -> Tensor:
    """The cells of a row seen once sight spreads from the ``marked`` ones through the
    ``clear`` (see-through) ones, both ways: cell ``i`` is seen iff some marked cell ``k`` has
    every cell from ``k`` up to (not including) ``i`` clear.

    Shapes: ``(N, size)`` bool, ``(N, size)`` bool -> ``(N, size)`` bool.
    """
    index = torch.arange(marked.shape[-1], device=marked.device).expand_as(marked)
    none = torch.full_like(index[..., :1], -1)

    def rightwards(marked: Tensor, clear: Tensor) -> Tensor:
        last_mark = torch.where(marked, index, -1).cummax(dim=-1).values
        opaque = torch.where(clear, -1, index)
        last_opaque_before = torch.cat((none, opaque[..., :-1]), dim=-1).cummax(dim=-1).values
        return last_mark > last_opaque_before

    leftwards = rightwards(marked.flip(-1), clear.flip(-1)).flip(-1)
    return rightwards(marked, clear) | leftwards


def _row_step(marked: Tensor, clear: Tensor) -> tuple[Tensor, Tensor]:
    """One row of ``process_vis``: the row's seen cells, and the marks it leaves on the row
    above (at and beside every seen see-through cell).

    Shapes: ``(N, size)`` bool twice -> ``(N, size)`` bool twice.
    """
    seen = _spread(marked, clear)
    lit = seen & clear
    above = lit.clone()
    above[:, 1:] |= lit[:, :-1]
    above[:, :-1] |= lit[:, 1:]
    return seen, above


@functools.cache
def _row_table(size: int, device: torch.device) -> Tensor:
    """:func:`_row_step` of every pair of row masks, as bits: entry ``marked << size | clear``
    holds ``seen | above << size``.

    Shapes: returns ``(2 ** (2 * size),)`` int64.
    """
    bits = 1 << torch.arange(size, device=device)
    pairs = torch.arange(1 << (2 * size), device=device)
    marked, clear = ((pairs >> size)[:, None] & bits) != 0, (pairs[:, None] & bits) != 0
    seen, above = _row_step(marked, clear)
    return (seen.long() * bits).sum(1) | ((above.long() * bits).sum(1) << size)


def visibility(cells: Tensor) -> Tensor:
    """MiniGrid's ``process_vis`` of every env's view (the module's docstring).

    Shapes: ``(N, size, size)`` packed cells -> ``(N, size, size)`` bool.
    """
    num_envs, size = cells.shape[0], cells.shape[1]
    clear = see_behind(cells)
    if size > TABLE_VIEW:
        return _visibility_by_rows(clear)
    table, mask = _row_table(size, cells.device), (1 << size) - 1
    bits = 1 << torch.arange(size, device=cells.device)
    clear_rows = (clear.long() * bits[:, None]).sum(dim=1)  # (N, size): row j's bits over i
    marked = torch.full((num_envs,), 1 << (size // 2), dtype=torch.int64, device=cells.device)
    seen_rows = []
    for j in reversed(range(size)):
        entry = table[(marked << size) | clear_rows[:, j]]
        seen_rows.append(entry & mask)
        marked = entry >> size
    seen = torch.stack(seen_rows[::-1], dim=1)  # (N, size): row j's seen bits over i
    return (seen[:, None, :] & bits[None, :, None]) != 0


def _visibility_by_rows(clear: Tensor) -> Tensor:
    """:func:`visibility` one row at a time with :func:`_row_step` (views wider than
    :data:`TABLE_VIEW`).

    Shapes: ``(N, size, size)`` bool -> ``(N, size, size)`` bool.
    """
    num_envs, size = clear.shape[0], clear.shape[1]
    marked = torch.zeros(num_envs, size, dtype=torch.bool, device=clear.device)
    marked[:, size // 2] = True
    rows = []
    for j in reversed(range(size)):
        seen, marked = _row_step(marked, clear[:, :, j])
        rows.append(seen)
    return torch.stack(rows[::-1], dim=2)


def egocentric_image(grid: Tensor, agent_pos: Tensor, agent_dir: Tensor, carrying: Tensor,
                     size: int, *, see_through_walls: bool = False) -> Tensor:
    """Every env's ``gen_obs()["image"]``: with MiniGrid's visibility mask
    (``see_through_walls=False``, as in DoorKey, Memory and RedBlueDoors), or every cell seen
    (True, as in Fetch, GoToObject and GoToDoor).

    Shapes:
        - ``grid``: ``(N, W, H, 4)`` uint8; ``agent_pos``: ``(N, 2)``; ``agent_dir``: ``(N,)``;
          ``carrying``: ``(N, 4)`` uint8, the carried object's cell (``(1, 0, 0, 0)`` none)
        - returns ``(N, size, size, 3)`` uint8

    On the CPU the compiled loops compute the same image in one pass over the envs
    (``minigrid_view`` in ``rlmem/cells/_engines/csrc/minigrid.h``, with MiniGrid's
    ``process_vis`` loop as it is; :mod:`rlmem.cells._engines.compiled` says when they do not
    run): at 16 envs the ATen calls below cost far more to make than to run.
    """
    native = compiled.ops(grid)
    if native is not None:
        image: Tensor = native.minigrid_view(grid, agent_pos, agent_dir, carrying,
                                             _view_table(size, grid.device), see_through_walls,
                                             KERNEL_CODES)
        return image
    cells = view_cells(grid, agent_pos, agent_dir, size)
    if not see_through_walls:
        cells = torch.where(visibility(cells), cells, 0)
    cells[:, size // 2, size - 1] = packed(carrying)
    return unpacked(cells)

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
``size`` rows of the view only, never over envs or cells.

Every visible cell shows its encoding, an unseen one ``(0, 0, 0)``, and the agent's own cell
what the agent carries (``(1, 0, 0)``, empty, when nothing): MiniGrid's ``Grid.encode`` of the
view with the visibility mask.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from rlmem.envs.minigrid_view import view_offsets
from rlmem.envs.tensor.minigrid.objects import WALL_CELL, encoding, see_behind

DIRECTIONS = 4
"""MiniGrid's agent directions: 0 east, 1 south, 2 west, 3 north."""


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
    """What each cell of every env's view holds, seen or not (grey walls beyond the edge).

    Shapes:
        - ``grid``: ``(N, W, H, 3)`` uint8; ``agent_pos``: ``(N, 2)`` int64 (x, y);
          ``agent_dir``: ``(N,)`` int64
        - returns ``(N, size, size, 3)`` uint8, ``[n, i, j]`` view column ``i``, row ``j``
    """
    num_envs, width, height, _ = grid.shape
    offsets = _view_table(size, grid.device)[agent_dir]  # (N, size, size, 2)
    x = agent_pos[:, 0, None, None] + offsets[..., 0]
    y = agent_pos[:, 1, None, None] + offsets[..., 1]
    inside = (x >= 0) & (x < width) & (y >= 0) & (y < height)
    flat = (x.clamp(0, width - 1) * height + y.clamp(0, height - 1)).reshape(num_envs, -1)
    cells = grid.reshape(num_envs, width * height, 3).gather(
        1, flat.unsqueeze(-1).expand(-1, -1, 3)).reshape(num_envs, size, size, 3)
    return torch.where(inside.unsqueeze(-1), cells, encoding(WALL_CELL, grid.device))


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


def visibility(cells: Tensor) -> Tensor:
    """MiniGrid's ``process_vis`` of every env's view (the module's docstring).

    Shapes: ``(N, size, size, 3)`` -> ``(N, size, size)`` bool.
    """
    num_envs, size = cells.shape[0], cells.shape[1]
    clear = see_behind(cells)
    marked = torch.zeros(num_envs, size, dtype=torch.bool, device=cells.device)
    marked[:, size // 2] = True
    rows = []
    for j in reversed(range(size)):
        seen = _spread(marked, clear[:, :, j])
        rows.append(seen)
        lit = seen & clear[:, :, j]
        marked = lit.clone()
        marked[:, 1:] |= lit[:, :-1]
        marked[:, :-1] |= lit[:, 1:]
    return torch.stack(rows[::-1], dim=2)


def egocentric_image(grid: Tensor, agent_pos: Tensor, agent_dir: Tensor, carrying: Tensor,
                     size: int, see_through_walls: bool = False) -> Tensor:
    """Every env's ``gen_obs()["image"]``.

    Shapes:
        - ``grid``: ``(N, W, H, 3)`` uint8; ``agent_pos``: ``(N, 2)``; ``agent_dir``: ``(N,)``;
          ``carrying``: ``(N, 3)`` uint8, the carried object's encoding (``(1, 0, 0)`` none)
        - returns ``(N, size, size, 3)`` uint8
    """
    cells = view_cells(grid, agent_pos, agent_dir, size)
    if see_through_walls:
        image = cells.clone()
    else:
        image = torch.where(visibility(cells).unsqueeze(-1), cells, 0)
    image[:, size // 2, size - 1] = carrying
    return image

"""POPGym's Battleship as a tensor env: sink hidden ships, told only whether each shot hit.

POPGym's ``Battleship(board_size, ship_sizes)`` hides ships of ``ship_sizes`` cells (2, 3, 3
and 4) on a ``B x B`` board; the action is a cell ``(row, column)``, and the observation is 1
for a hit on a ship cell not fired at before, else 0. A reference loop of one episode::

    board = place_ships(); fired = zeros(B, B); hits = steps = 0      # reset: observe 0
    while True:                                                       # step((row, column))
        hit = board[row, column] and not fired[row, column]
        fired[row, column] = 1; hits += hit; steps += 1
        reward = 1 / H if hit else -1 / (B * B - H)                   # H = sum(ship_sizes)
        terminated, truncated = hits == H, steps >= B * B             # observe hit

POPGym places each ship in turn by rejection: a start cell, an axis and a sign, each uniform,
until the ship lies on the board clear of the ships placed before. Each placement (a run of
cells) is reached from either of its ends, so the one accepted is uniform among the clear
placements of either axis: what :func:`place_ships` draws in one step
(:func:`rlmem.envs.tensor.random.choose_cell`). Easy: ``B = 8``; Medium: 10; Hard: 12.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv
from rlmem.envs.tensor.random import choose_cell

SHIP_SIZES = (2, 3, 3, 4)


def clear_placements(board: Tensor, size: int) -> Tensor:
    """Where a ship of ``size`` cells can go on each board: ``[axis, row, column]`` of its
    first cell (axis 0: along a row, 1: down a column), True where all its cells are on the
    board and free.

    Shapes: ``board`` ``(N, B, B)`` bool -> ``(N, 2, B, B)`` bool.
    """
    taken = board.to(torch.int64)
    # Cells past the edge count as taken, so that a ship running off the board is not clear.
    along_row = F.pad(taken, (0, size - 1), value=1).unfold(2, size, 1).sum(-1)
    down_column = F.pad(taken, (0, 0, 0, size - 1), value=1).unfold(1, size, 1).sum(-1)
    return torch.stack([along_row, down_column], dim=1) == 0


def place_ships(board_size: int, ship_sizes: Sequence[int], draws: Tensor) -> Tensor:
    """Boards with ``ship_sizes`` placed one after another, each uniformly among its clear
    placements (module docstring), from one draw per ship.

    Shapes: ``draws`` ``(N, len(ship_sizes))`` -> ``(N, B, B)`` bool.
    """
    count, cells = draws.shape[0], board_size * board_size
    board = torch.zeros(count, board_size, board_size, dtype=torch.bool, device=draws.device)
    line = torch.arange(board_size, device=draws.device)
    rows, columns = line.view(1, -1, 1), line.view(1, 1, -1)
    for ship, size in enumerate(ship_sizes):
        chosen = choose_cell(draws[:, ship], clear_placements(board, size).flatten(1))
        axis, row, column = chosen // cells, chosen % cells // board_size, chosen % board_size
        row, column, down = row.view(-1, 1, 1), column.view(-1, 1, 1), axis.view(-1, 1, 1) == 1
        across = (rows == row) & (columns >= column) & (columns < column + size)
        downward = (columns == column) & (rows >= row) & (rows < row + size)
        board |= torch.where(down, downward, across)
    return board


class Battleship(PopgymTensorEnv):
    """POPGym's ``Battleship(board_size, ship_sizes)`` for ``num_envs`` envs (module
    docstring).

    State: ``board`` and ``fired`` ``(N, B, B)`` bool, ``hits``, ``steps`` and ``shown`` (the
    last observation) ``(N,)`` int64.
    """

    def __init__(self, num_envs: int, board_size: int = 10,
                 ship_sizes: Sequence[int] = SHIP_SIZES,
                 device: torch.device | str = "cpu") -> None:
        self.board_size, self.ship_sizes = board_size, tuple(ship_sizes)
        self.needed = sum(self.ship_sizes)
        self.limit = board_size * board_size
        if any(size > board_size for size in self.ship_sizes) or self.needed >= self.limit:
            raise ValueError(f"Battleship: ships of {list(self.ship_sizes)} cells do not fit "
                             f"a {board_size}x{board_size} board")
        super().__init__(num_envs, spaces.Discrete(2),
                         spaces.MultiDiscrete([board_size, board_size]),
                         draws_per_episode=len(self.ship_sizes), device=device)
        self.board = torch.zeros(num_envs, board_size, board_size, dtype=torch.bool,
                                 device=self.device)
        self.fired = torch.zeros_like(self.board)
        self.hits = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.steps = torch.zeros_like(self.hits)
        self.shown = torch.zeros_like(self.hits)

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        fresh = envs.view(-1, 1, 1)
        boards = place_ships(self.board_size, self.ship_sizes, draws)
        self.board = torch.where(fresh, boards, self.board)
        self.fired = self.fired & ~fresh
        self.hits, self.steps, self.shown = (torch.where(envs, 0, value) for value in
                                             (self.hits, self.steps, self.shown))

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        cell = (actions[:, 0] * self.board_size + actions[:, 1]).unsqueeze(1)
        ship = self.board.flatten(1).gather(1, cell).squeeze(1)
        fired = self.fired.flatten(1)
        hit = ship & ~fired.gather(1, cell).squeeze(1)
        self.fired = fired.scatter(1, cell, True).view_as(self.board)
        self.hits = self.hits + hit.to(torch.int64)
        self.steps = self.steps + 1
        self.shown = hit.to(torch.int64)
        miss = torch.full(hit.shape, -1.0 / (self.limit - self.needed), dtype=torch.float64,
                          device=self.device)
        reward = torch.where(hit, 1.0 / self.needed, miss)
        return reward, self.hits == self.needed, self.steps >= self.limit

    def _observe(self) -> Tensor:
        return self.shown.clone()

    @classmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        cls._check_original(env)
        return {"board_size": int(env.board_size),
                "ship_sizes": tuple(int(size) for size in env.ship_sizes)}

    def _load(self, row: int, env: Any) -> None:
        self.board[row] = torch.as_tensor(env.board != 0)
        self.fired[row] = torch.as_tensor(env.guesses != 0)
        self.hits[row], self.steps[row] = int(env.hits), int(env.num_steps)
        self.shown[row] = int(env.last_obs)

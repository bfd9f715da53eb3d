"""Counter-based random numbers for batched envs: every draw of env ``i`` is a hash of its
seed, its episode number and the draw's index, so each env has its own stream, on any device,
without a generator object per env.

A draw is ``u = h / 2**32`` with ``h = lowbias32(lowbias32(lowbias32(seed) + episode) + k)``
(sums mod 2**32), ``k`` the draw's index within the episode's generation, and lowbias32 Chris
Wellons' 32-bit integer hash (``x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15;
x *= 0x846ca68b; x ^= x >> 16``). A reference loop for one env::

    def draws(seed, episode, count):
        base = lowbias32((lowbias32(seed) + episode) % 2**32)
        return [lowbias32((base + k) % 2**32) / 2**32 for k in range(count)]

The streams are not NumPy's (MiniGrid's envs draw from a ``numpy.random.Generator``), so a
tensor env's layouts match its original's in distribution, not draw for draw: the tests compare
the distributions (``tests/envs/test_tensor_minigrid_generation.py``).

Everything is int64 holding values below ``2**32``; each product is kept below ``2**63`` by
multiplying by the constant's two 16-bit halves apart, so nothing relies on integer overflow.
"""

from __future__ import annotations

import torch
from torch import Tensor

MASK32 = 0xFFFFFFFF
"""The low 32 bits."""

_LOWBIAS32 = (0x7FEB352D, 0x846CA68B)
"""lowbias32's two multipliers."""


def _multiply32(x: Tensor, constant: int) -> Tensor:
    """``x * constant mod 2**32`` for ``x < 2**32``, every intermediate below ``2**63``."""
    if constant < 2**31:
        return (x * constant) & MASK32
    low, high = constant & 0xFFFF, constant >> 16
    return (x * low + (((x * high) & 0xFFFF) << 16)) & MASK32


def lowbias32(x: Tensor) -> Tensor:
    """Wellons' lowbias32 hash of int64 values in ``[0, 2**32)``.

    Shapes: any -> the same, int64 in ``[0, 2**32)``.
    """
    x = x ^ (x >> 16)
    x = _multiply32(x, _LOWBIAS32[0])
    x = x ^ (x >> 15)
    x = _multiply32(x, _LOWBIAS32[1])
    return x ^ (x >> 16)


def fold_seed(seed: Tensor) -> Tensor:
    """A non-negative int64 seed folded to 32 bits (its two halves xor-ed), so that seeds
    beyond ``2**32`` still give different streams.

    Shapes: any -> the same.
    """
    return (seed & MASK32) ^ ((seed >> 32) & MASK32)


def uniform_draws(seed: Tensor, episode: Tensor, count: int) -> Tensor:
    """``count`` uniform draws in ``[0, 1)`` per env, for its episode ``episode``.

    Args:
        seed: each env's folded seed (:func:`fold_seed`), int64 in ``[0, 2**32)``.
        episode: each env's episode number since its seed was set.
        count: draws per env.

    Shapes:
        - ``seed``, ``episode``: ``(N,)`` int64
        - returns ``(N, count)`` float64, multiples of ``2**-32``
    """
    return episode_draws(lowbias32(seed), episode, count)


def episode_draws(seed_hash: Tensor, episode: Tensor, count: int) -> Tensor:
    """:func:`uniform_draws` from ``lowbias32(seed)``, which an env works out once per seed.

    Shapes: ``(N,)``, ``(N,)`` int64 -> ``(N, count)`` float64.
    """
    base = lowbias32((seed_hash + episode) & MASK32)
    index = torch.arange(count, device=seed_hash.device, dtype=torch.int64)
    hashed = lowbias32((base.unsqueeze(1) + index) & MASK32)
    return hashed.to(torch.float64) * 2.0**-32


def integers(draw: Tensor, low: Tensor | int, high: Tensor | int) -> Tensor:
    """An integer in ``[low, high)`` per draw (``floor(low + draw * (high - low))``), the bias of
    one part in ``2**32 / (high - low)`` negligible for the ranges of an env's layout.

    Shapes: ``draw`` ``(N,)``, ``low`` and ``high`` scalars or ``(N,)`` -> ``(N,)`` int64.
    """
    return low + (draw * (high - low)).to(torch.int64)  # truncation: floor, draw >= 0


def choose_cell(draw: Tensor, allowed: Tensor) -> Tensor:
    """The index of one allowed cell per env, uniformly among its allowed cells: what MiniGrid's
    rejection sampling (``place_obj``) gives, drawn in one step.

    Args:
        draw: one uniform draw per env.
        allowed: which cells may be chosen; every env needs at least one.

    Shapes:
        - ``draw``: ``(N,)`` float64; ``allowed``: ``(N, cells)`` bool
        - returns ``(N,)`` int64, the flat index of the chosen cell
    """
    counts = allowed.sum(dim=1)
    rank = integers(draw, 0, counts)  # the rank-th allowed cell, from 0
    running = allowed.to(torch.int64).cumsum(dim=1)
    # The first cell whose running count passes the rank is the chosen one.
    return (running <= rank.unsqueeze(1)).sum(dim=1)


def choose_distinct(draws: Tensor, allowed: Tensor) -> tuple[Tensor, Tensor]:
    """``n`` distinct allowed indices per env, each uniform among the allowed ones not chosen
    before it: what drawing again until the draw is new gives (MiniGrid's ``place_obj`` of one
    object after another, its families' loops over distinct colours and objects), one
    :func:`choose_cell` per index.

    Args:
        draws: ``n`` uniform draws per env, one per index to choose.
        allowed: which indices may be chosen; every env needs at least ``n``.

    Shapes:
        - ``draws``: ``(N, n)`` float64; ``allowed``: ``(N, C)`` bool
        - returns ``(N, n)`` int64, the chosen indices in order, and ``(N, C)`` bool, the
          allowed indices left
    """
    chosen = []
    for draw in draws.unbind(1):  # a few indices, each chosen for every env at once
        chosen.append(choose_cell(draw, allowed))
        allowed = allowed.scatter(1, chosen[-1][:, None], False)
    return torch.stack(chosen, dim=1), allowed

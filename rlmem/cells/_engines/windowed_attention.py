r"""Attention over a sliding window of past steps, for a whole chunk at once (GTrXL's engine).

A cell that attends over the last ``M`` steps of its episode holds them in its state as ``M``
slots (oldest first) and a validity mask. Its ``step`` attends from one query over the slots
and itself, then shifts itself into the window. Over a chunk of ``T`` steps the same is one
attention call per block of :func:`query_block` queries (one call for a chunk of up to that
many steps): the keys are the ``M`` slots followed by the chunk, and :func:`window_mask` says
which key each query may see (within ``M`` steps before it, not before its episode's start,
not an empty slot); the blocks keep memory linear in ``T``. :func:`slide_window` then
leaves the window as ``T`` steps would have, the slots from before a reset emptied (zero and
invalid), exactly as a reset leaves the state. :func:`relative_attention` is the attention
itself, with Transformer-XL's relative positions, shared by the step and the chunk.

Tensor functions, on any device; the cell's ``step`` is the specification
(``tests/cells/test_modern_cells.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

QUERY_BLOCK_MIN = 16
"""The fewest queries per attention call on the CPU: a PPO chunk of up to 16 steps is one call
per layer."""
QUERY_BLOCK_GPU = 128
"""The fewest queries per attention call elsewhere (a GPU, where each call's launches cost more
than masked scores; the block every device took before the CPU's was measured)."""


def query_block(window: int, device: torch.device) -> int:
    """Queries per attention call over a chunk, for a window of ``window`` steps on ``device``.

    A call of ``Q`` queries scores each against the ``M + Q`` keys of the window and the block,
    of which at most ``M + 1`` are allowed: longer blocks spend their time on masked scores,
    shorter ones on more calls. On the CPU, blocks of about the window (each query scoring
    ``2M`` keys) took least time (``benchmarks/gtrxl_blocks.py``), no fewer than
    :data:`QUERY_BLOCK_MIN`; elsewhere no fewer than :data:`QUERY_BLOCK_GPU`.
    """
    return max(window, QUERY_BLOCK_MIN if device.type == "cpu" else QUERY_BLOCK_GPU)


def last_reset(resets: Tensor) -> Tensor:
    """``(T, B)`` long: the last step ``≤ t`` that resets, or -1 where none has.

    This is how the chunk's engine reads the resets (the step's loop zeroes the state instead).
    """
    steps = torch.arange(resets.shape[0], device=resets.device).unsqueeze(1)
    return torch.where(resets, steps, -1).cummax(dim=0).values


def window_mask(valid: Tensor, start: Tensor, begin: int, end: int) -> Tensor:
    """Which key each query ``t`` in ``[begin, end)`` of the chunk attends to.

    Key ``p < M`` is slot ``p`` of the window before the chunk, key ``M + s`` is step ``s`` of
    the chunk; the keys given are ``p`` in ``[begin, M + end)``, all those the queries can
    reach. Query ``t`` sees the keys at distance ``0 ≤ M + t - p ≤ M``; a slot only if it is
    valid and no reset came at or before ``t``; a step ``s`` only if no reset came in
    ``(s, t]``.

    Shapes:
        - valid: ``(B, M)`` bool; start: ``(T, B)`` long, :func:`last_reset` of the resets
        - returns ``(B, end - begin, M + end - begin)`` bool
    """
    window, device = valid.shape[1], valid.device
    t = torch.arange(begin, end, device=device).unsqueeze(1)
    p = torch.arange(begin, window + end, device=device)
    band = (p <= window + t) & (p >= t)
    episode = start[begin:end].T.unsqueeze(2)  # (B, Q, 1): the query's episode start
    slots = valid[:, p.clamp(max=window - 1)].unsqueeze(1) & (episode < 0)
    steps = (p - window) >= episode
    return torch.where(p < window, slots, steps) & band


def slide_window(memory: Tensor, inputs: Tensor, valid: Tensor,
                 resets: Tensor) -> tuple[Tensor, Tensor]:
    """The window after the chunk: its last ``M`` entries, those before the last reset emptied
    (zero and invalid).

    Shapes:
        - memory: ``(B, L, M, D)``, the slots of each of L layers; inputs: ``(B, L, T, D)``;
          valid: ``(B, M)`` bool; resets: ``(T, B)`` bool
        - returns memory ``(B, L, M, D)`` and valid ``(B, M)``
    """
    window, steps = valid.shape[1], resets.shape[0]
    start = last_reset(resets)[-1].unsqueeze(1)  # (B, 1)
    since_reset = torch.cat([(start < 0).expand_as(valid),
                             torch.arange(steps, device=resets.device).unsqueeze(0) >= start],
                            dim=1)[:, -window:]
    held = since_reset & torch.cat([valid, torch.ones_like(valid[:, :1]).expand(-1, steps)],
                                   dim=1)[:, -window:]
    # Empty slots carried from before the chunk stay as they were (as the step shifts them
    # along); the slots before a reset are zeroed, as the step's reset zeroes them.
    slots = torch.cat([memory, inputs], dim=2)[:, :, -window:]
    zero = torch.zeros((), dtype=slots.dtype, device=slots.device)
    return torch.where(since_reset[:, None, :, None], slots, zero), held


def relative_weights(content: Tensor, q: Tensor, r: Tensor, w: Tensor,
                     allowed: Tensor) -> Tensor:
    r"""The attention weights :math:`\mathrm{softmax}_p(A_{tp})` of :func:`relative_attention`
    from its content term :math:`(q_t + u)^\top k_p`, adding the position term and masking.

    Shapes:
        - content: ``(B, h, T, M + T)``; q: ``(B, T, h, d)``; r: ``(M + 1, h, d)``; w:
          ``(h, d)``; allowed: ``(B, T, M + T)`` bool; returns ``(B, h, T, M + T)``
    """
    batch, steps, heads, size = q.shape
    window = content.shape[3] - steps
    by_distance = torch.einsum("bthd,mhd->bhtm", q + w, r)
    t = torch.arange(steps, device=q.device).unsqueeze(1)
    p = torch.arange(window + steps, device=q.device).unsqueeze(0)
    distance = (window + t - p).clamp(0, window).expand(batch, heads, steps, window + steps)
    scores = (content + by_distance.gather(3, distance)) * size ** -0.5
    scores = scores.masked_fill(~allowed.unsqueeze(1), float("-inf"))
    return torch.softmax(scores, dim=3)


def relative_attention(q: Tensor, k: Tensor, v: Tensor, r: Tensor, u: Tensor, w: Tensor,
                       allowed: Tensor) -> Tensor:
    r"""Multi-head attention with Transformer-XL's relative positions (Dai et al., 2019, §3.3).

    .. math::
        A_{tp} = \frac{(q_t + u)^\top k_p + (q_t + w)^\top r_{t - p}}{\sqrt d}, \qquad
        o_t = \sum_p \mathrm{softmax}_p(A_{tp}) v_p

    over the allowed keys ``p``, where query ``t`` sits at key position ``M + t`` (``M`` keys
    come before the queries' own) and :math:`r_\delta` encodes the distance δ ∈ [0, M].
    Every query must be allowed at least one key (itself).

    Shapes:
        - q: ``(B, T, h, d)``; k, v: ``(B, M + T, h, d)``; r: ``(M + 1, h, d)``; u, w:
          ``(h, d)``; allowed: ``(B, T, M + T)`` bool; returns ``(B, T, h, d)``
    """
    content = torch.einsum("bthd,bphd->bhtp", q + u, k)
    return torch.einsum("bhtp,bphd->bthd", relative_weights(content, q, r, w, allowed), v)


def folded_relative_attention(q: Tensor, context: Tensor, key_weight: Tensor,
                              value_weight: Tensor, r: Tensor, u: Tensor, w: Tensor,
                              allowed: Tensor) -> Tensor:
    r""":func:`relative_attention` with the keys :math:`k_p = W_k c_p` and values
    :math:`v_p = W_v c_p` never formed: per head, :math:`(q_t + u)^\top W_k c_p =
    (W_k^\top (q_t + u))^\top c_p` and :math:`\sum_p a_{tp} W_v c_p = W_v \sum_p a_{tp} c_p`.

    The same numbers in another order of products: projecting every key and value costs
    :math:`2 (M + T) D^2` multiplications, folding :math:`2 T D^2` plus an attention over
    ``D`` features per head instead of ``d``; :func:`folds_keys` says which is fewer. A query
    at a time over a window of steps (the acting step) folds.

    Shapes:
        - q: ``(B, T, h, d)``; context: ``(B, M + T, D)``, what the keys and values are maps of;
          key_weight, value_weight: ``(h, d, D)``; r: ``(M + 1, h, d)``; u, w: ``(h, d)``;
          allowed: ``(B, T, M + T)`` bool; returns ``(B, T, h, d)``
    """
    batch, steps, heads, _ = q.shape
    folded = torch.einsum("bthd,hdf->bthf", q + u, key_weight).reshape(batch, steps * heads, -1)
    content = torch.bmm(folded, context.transpose(1, 2))  # (B, T h, M + T)
    content = content.view(batch, steps, heads, -1).transpose(1, 2)
    weights = relative_weights(content, q, r, w, allowed)  # (B, h, T, M + T)
    read = torch.bmm(weights.transpose(1, 2).reshape(batch, steps * heads, -1), context)
    return torch.einsum("bthf,hdf->bthd", read.view(batch, steps, heads, -1), value_weight)


def folds_keys(queries: int, keys: int, size: int, heads: int) -> bool:
    """Whether :func:`folded_relative_attention` takes fewer multiplications than projecting
    the ``keys`` keys and values of width ``size`` for ``queries`` queries with ``heads``
    heads (the query's own projection, the positions and the softmax are common to both)."""
    projected = 2 * keys * size * size + 2 * queries * keys * size
    folded = 2 * queries * size * size + 2 * queries * keys * size * heads
    return folded < projected

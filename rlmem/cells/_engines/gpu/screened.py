r"""Relevancy screening's Triton kernels (ReLSTM, ReLRNN): one fused kernel per step forward
and one per step backward, between the step's cuBLAS matmul of the recurrent weights.

The loops of :mod:`rlmem.cells._engines.screened` (``_screened_loop``,
``_screened_backward_loop``, their reference) over the same buffers, in the same layouts, so
that everything before and after the loops is the engine's own. A step of the forward is

- cuBLAS: ``z = s_{k-1} W^\top`` (the base's recurrent terms over the attention query);
- one kernel, a program per batch item: the reset of step ``k`` (the incoming state, the
  cell state and the memory emptied, as :func:`rlmem.cells.resets.reset_where` does); the
  screening (the oldest state of S moved into R by its rank: the first free slot, else the
  first lowest score, else the scratch slot); the base's gates and ``h_k``; its key
  ``2 U_a h_k`` (an ``H × H`` product in registers); the attention (sigmoid of keys plus
  query, scores, the masked softmax, the read, ``s_k = h_k + \text{read}``) and the attention
  received by S added to its scores.

A step of the backward is one kernel (the attention's, the base's and the slot moves'
backward, the reset's cut) and cuBLAS ``dz_k W`` for the previous macro-state's gradient.
The slots' rows are loaded whole into registers, changed there and stored once (after a
barrier, so that no thread overwrites what another has still to read).

Limits: the hidden size up to :data:`MAX_HIDDEN` and ``ν + ρ + 1`` slots up to
:data:`MAX_SLOTS` (register tiles); the engine falls back above them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

MAX_HIDDEN = 128
"""The largest hidden size the kernels hold in registers (the ``H × H`` key product)."""
MAX_SLOTS = 64
"""The most slots (``ν + ρ`` and the scratch slot) the kernels hold in registers."""
PAD = 16
"""Columns after ``[m, 2 U_a m]`` in a slot's row (the engine's ``_PAD``): score, mask, rank,
episode step, padding."""


def uncovered(hidden: int, slots: int) -> str | None:
    """Why the kernels cannot take ``hidden`` and ``slots`` (``ν + ρ``), or ``None``."""
    if hidden > MAX_HIDDEN:
        return f"hidden size {hidden} above the kernels' {MAX_HIDDEN}"
    if slots + 1 > MAX_SLOTS:
        return f"{slots} slots (ν + ρ) above the kernels' {MAX_SLOTS - 1}"
    return None


def _blocks(hidden: int, slots: int) -> dict[str, int]:
    block_h = max(16, triton.next_power_of_2(hidden))
    return {"BLOCK_H": block_h, "BLOCK_N": max(16, triton.next_power_of_2(slots + 1)),
            "num_warps": 4 if block_h <= 64 else 8}


@triton.jit
def _sigmoid(x):  # type: ignore[no-untyped-def]
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _row(tile, rows, which):  # type: ignore[no-untyped-def]
    """Row ``which`` of a ``(BLOCK_N, BLOCK_H)`` tile, exactly (one term, the rest zeros)."""
    return tl.sum(tl.where(rows[:, None] == which, tile, 0.0), axis=0)


@triton.jit
def _entry(vector, rows, which):  # type: ignore[no-untyped-def]
    """Entry ``which`` of a ``(BLOCK_N,)`` vector, exactly (also when it is -inf)."""
    return tl.max(tl.where(rows == which, vector, float("-inf")), axis=0)


@triton.jit
def _screen(content, keys, score, mask, rank, time, rows, p, evicted_ptr, target_ptr,
            H: tl.constexpr, N: tl.constexpr, NU: tl.constexpr, SAVE: tl.constexpr,
            cols, col_ok):  # type: ignore[no-untyped-def]
    """The screening of the oldest state of S (slot ``p``) into R: its target row (the first
    free slot of R, else the first lowest rank, if it ranks above that; else the scratch
    slot ``N``), what that row held (``evicted``, when saving), and the row moved."""
    in_r = (rows >= NU) & (rows < N)
    ranks_r = tl.where(in_r, rank, float("inf"))
    lowest = tl.min(ranks_r, axis=0)
    slot = tl.min(tl.where(in_r & (ranks_r == lowest), rows, 2 * N + 2), axis=0)
    target = tl.where(_entry(rank, rows, p) > lowest, slot, N)
    tl.store(target_ptr, target.to(tl.int64))
    if SAVE:
        tl.store(evicted_ptr + cols, _row(content, rows, target), mask=col_ok)
        tl.store(evicted_ptr + H + cols, _row(keys, rows, target), mask=col_ok)
        tl.store(evicted_ptr + 2 * H, _entry(score, rows, target))
        tl.store(evicted_ptr + 2 * H + 1, _entry(mask, rows, target))
        tl.store(evicted_ptr + 2 * H + 2, _entry(rank, rows, target))
        tl.store(evicted_ptr + 2 * H + 3, _entry(time, rows, target))
    at = rows == target
    content = tl.where(at[:, None], _row(content, rows, p)[None, :], content)
    keys = tl.where(at[:, None], _row(keys, rows, p)[None, :], keys)
    score = tl.where(at, _entry(score, rows, p), score)
    mask = tl.where(at, _entry(mask, rows, p), mask)
    rank = tl.where(at, _entry(rank, rows, p), rank)
    time = tl.where(at, _entry(time, rows, p), time)
    return content, keys, score, mask, rank, time


@triton.jit
def _gates(xp_ptr, z_ptr, act_ptr, partner_ptr, c_next_ptr, reset, cols, col_ok,
           H: tl.constexpr, LSTM: tl.constexpr):  # type: ignore[no-untyped-def]
    """The base's ``h_k`` from its input terms and (unless the item resets) its recurrent
    terms; the LSTM writes its gates and ``[g, c_{k-1}, 2i, tanh c_k]`` for the backward, and
    ``c_k``. Every tanh is :math:`2\\sigma(2x) - 1` of a doubled pre-activation."""
    if LSTM:
        z_i = tl.load(xp_ptr + cols, mask=col_ok, other=0.0) + tl.where(
            reset, 0.0, tl.load(z_ptr + cols, mask=col_ok, other=0.0))
        z_f = tl.load(xp_ptr + H + cols, mask=col_ok, other=0.0) + tl.where(
            reset, 0.0, tl.load(z_ptr + H + cols, mask=col_ok, other=0.0))
        z_g = tl.load(xp_ptr + 2 * H + cols, mask=col_ok, other=0.0) + tl.where(
            reset, 0.0, tl.load(z_ptr + 2 * H + cols, mask=col_ok, other=0.0))
        z_o = tl.load(xp_ptr + 3 * H + cols, mask=col_ok, other=0.0) + tl.where(
            reset, 0.0, tl.load(z_ptr + 3 * H + cols, mask=col_ok, other=0.0))
        i, f, g_sigmoid, o = _sigmoid(z_i), _sigmoid(z_f), _sigmoid(z_g), _sigmoid(z_o)
        c_prev = tl.where(reset, 0.0, tl.load(partner_ptr + H + cols, mask=col_ok, other=0.0))
        g = 2.0 * g_sigmoid - 1.0
        c = f * c_prev + i * g
        tanh_c = 2.0 * _sigmoid(2.0 * c) - 1.0
        tl.store(act_ptr + cols, i, mask=col_ok)
        tl.store(act_ptr + H + cols, f, mask=col_ok)
        tl.store(act_ptr + 2 * H + cols, g_sigmoid, mask=col_ok)
        tl.store(act_ptr + 3 * H + cols, o, mask=col_ok)
        tl.store(partner_ptr + cols, g, mask=col_ok)
        tl.store(partner_ptr + H + cols, c_prev, mask=col_ok)
        tl.store(partner_ptr + 2 * H + cols, 2.0 * i, mask=col_ok)
        tl.store(partner_ptr + 3 * H + cols, tanh_c, mask=col_ok)
        tl.store(c_next_ptr + cols, c, mask=col_ok)
        return o * tanh_c
    z = tl.load(xp_ptr + cols, mask=col_ok, other=0.0) + tl.where(
        reset, 0.0, tl.load(z_ptr + cols, mask=col_ok, other=0.0))
    return 2.0 * _sigmoid(z) - 1.0


@triton.jit
def _load_slots(slot_row, rows, row_ok, cols, col_ok, reset, H: tl.constexpr, N: tl.constexpr,
                NU: tl.constexpr, NORMALISED: tl.constexpr,
                UNIFORM: tl.constexpr):  # type: ignore[no-untyped-def]
    """An item's slots as the step finds them, emptied where it resets (every row zero, the
    mask and rank -inf; a free slot of R ranks at ``UNIFORM`` under normalised screening)."""
    W: tl.constexpr = 2 * H + 16
    tile = rows[:, None] * W + cols[None, :]
    tile_ok = row_ok[:, None] & col_ok[None, :]
    content = tl.where(reset, 0.0, tl.load(slot_row + tile, mask=tile_ok, other=0.0))
    keys = tl.where(reset, 0.0, tl.load(slot_row + H + tile, mask=tile_ok, other=0.0))
    meta = slot_row + rows * W + 2 * H
    score = tl.where(reset, 0.0, tl.load(meta, mask=row_ok, other=0.0))
    mask = tl.where(reset, float("-inf"), tl.load(meta + 1, mask=row_ok, other=float("-inf")))
    empty_rank = tl.full(rows.shape, float("-inf"), tl.float32)
    if NORMALISED:
        empty_rank = tl.where((rows >= NU) & (rows < N), UNIFORM, empty_rank)
    rank = tl.where(reset, empty_rank, tl.load(meta + 2, mask=row_ok, other=float("-inf")))
    time = tl.where(reset, 0.0, tl.load(meta + 3, mask=row_ok, other=0.0))
    return content, keys, score, mask, rank, time


@triton.jit
def _store_slots(slot_row, content, keys, score, mask, rank, time, rows, row_ok, cols, col_ok,
                 H: tl.constexpr):  # type: ignore[no-untyped-def]
    W: tl.constexpr = 2 * H + 16
    tile = rows[:, None] * W + cols[None, :]
    tile_ok = row_ok[:, None] & col_ok[None, :]
    tl.debug_barrier()  # every thread has read the rows it is about to overwrite
    tl.store(slot_row + tile, content, mask=tile_ok)
    tl.store(slot_row + H + tile, keys, mask=tile_ok)
    meta = slot_row + rows * W + 2 * H
    tl.store(meta, score, mask=row_ok)
    tl.store(meta + 1, mask, mask=row_ok)
    tl.store(meta + 2, rank, mask=row_ok)
    tl.store(meta + 3, time, mask=row_ok)


@triton.jit
def _attend(content, keys, mask, query, score_ptr, e_ptr, rows, cols, col_ok, H: tl.constexpr,
            N: tl.constexpr, SAVE: tl.constexpr):  # type: ignore[no-untyped-def]
    """The attention weights over the ``N`` slots (``e`` saved for the backward) and the
    read :math:`\\sum_i z_i m_i`."""
    slot_ok = rows < N
    e = _sigmoid(keys + query[None, :])
    if SAVE:
        tl.store(e_ptr + rows[:, None] * H + cols[None, :], e,
                 mask=slot_ok[:, None] & col_ok[None, :])
    score_vector = tl.load(score_ptr + cols, mask=col_ok, other=0.0)
    logits = tl.where(slot_ok, tl.sum(e * score_vector[None, :], axis=1) + mask, float("-inf"))
    weights = tl.exp(logits - tl.max(logits, axis=0))
    weights = weights / tl.sum(weights, axis=0)
    return weights, tl.sum(weights[:, None] * content, axis=0)


@triton.jit
def _forward_step(xp_ptr, z_ptr, reset_ptr, entering_ptr, slot_ptr, act_ptr, partner_ptr,
                  c_next_ptr, key_ptr, score_ptr, bias_ptr, e_ptr, attention_ptr, history_ptr,
                  target_ptr, evicted_ptr, y_ptr, p, H: tl.constexpr, N: tl.constexpr,
                  NU: tl.constexpr, G: tl.constexpr, LSTM: tl.constexpr,
                  NORMALISED: tl.constexpr, UNIFORM: tl.constexpr, SAVE: tl.constexpr,
                  BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr):  # type: ignore[no-untyped-def]
    """Step ``k`` for batch item ``program_id(0)`` (see the module's docstring); ``p`` is
    ``k mod ν``, the slot of S that holds its oldest state."""
    b = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    col_ok = cols < H
    rows = tl.arange(0, BLOCK_N)
    row_ok = rows <= N
    reset = tl.load(reset_ptr + b) != 0
    slot_row = slot_ptr + b * ((N + 1) * (2 * H + 16))
    content, keys, score, mask, rank, time = _load_slots(
        slot_row, rows, row_ok, cols, col_ok, reset, H, N, NU, NORMALISED, UNIFORM)
    content, keys, score, mask, rank, time = _screen(
        content, keys, score, mask, rank, time, rows, p, evicted_ptr + b * (2 * H + 16),
        target_ptr + b, H, N, NU, SAVE, cols, col_ok)
    h = _gates(xp_ptr + b * G, z_ptr + b * (G + H), act_ptr + b * 4 * H,
               partner_ptr + b * 4 * H, c_next_ptr + b * 4 * H + H, reset, cols, col_ok, H,
               LSTM)
    key = tl.load(key_ptr + cols[:, None] * H + cols[None, :],
                  mask=col_ok[:, None] & col_ok[None, :], other=0.0)
    key_h = tl.sum(key * h[None, :], axis=1)  # 2 U_a h_k
    at = rows == p  # h_k enters S in the slot just vacated
    content = tl.where(at[:, None], h[None, :], content)
    keys = tl.where(at[:, None], key_h[None, :], keys)
    score = tl.where(at, 0.0, score)
    mask = tl.where(at, 0.0, mask)
    rank = tl.where(at, 0.0, rank)
    time = tl.where(at, tl.load(entering_ptr + b * 4 + 3), time)
    query = tl.load(bias_ptr + cols, mask=col_ok, other=0.0) + tl.where(
        reset, 0.0, tl.load(z_ptr + b * (G + H) + G + cols, mask=col_ok, other=0.0))
    weights, read = _attend(content, keys, mask, query, score_ptr, e_ptr + b * N * H, rows,
                            cols, col_ok, H, N, SAVE)
    slot_ok = rows < N
    tl.store(attention_ptr + b * N + rows, weights, mask=slot_ok)
    tl.store(y_ptr + b * H + cols, h + read, mask=col_ok)
    received = weights
    if NORMALISED:  # relative to the uniform share 1/|M_t|, averaged over the ν steps
        held = tl.sum(tl.where(slot_ok & (mask == 0.0), 1.0, 0.0), axis=0)
        received = weights * (held.to(weights.dtype) / NU)
    short = rows < NU
    score = tl.where(short, score + received, score)
    rank = tl.where(short, rank + received, rank)
    history = history_ptr + b * N * 4 + rows * 4
    tl.store(history, score, mask=slot_ok)
    tl.store(history + 1, mask, mask=slot_ok)
    tl.store(history + 2, rank, mask=slot_ok)
    tl.store(history + 3, time, mask=slot_ok)
    _store_slots(slot_row, content, keys, score, mask, rank, time, rows, row_ok, cols, col_ok,
                 H)


def forward_loop(xp: Tensor, s0: Tensor, resets: Tensor, any_reset: list[bool],
                 recurrent_t: Tensor, key: Tensor, score_vector: Tensor, query_bias: Tensor,
                 slot_data: Tensor, z: Tensor, entering: Tensor, e: Tensor, attention: Tensor,
                 history: Tensor, targets: Tensor, evicted: Tensor | None, y: Tensor,
                 lstm_buffers: tuple[Tensor, Tensor] | None, nu: int,
                 uniform_share: float | None) -> dict[int, Tensor]:
    """The engine's forward loop (``_screened_loop``) through the kernels, over its buffers;
    ``evicted`` given means saving for the backward. ``lstm_buffers`` is the LSTM base's
    ``(act, partner)``. Returns the slots as they were before each step that resets some item,
    when saving."""
    steps, batch, hidden = y.shape
    slots, save = attention.shape[2], evicted is not None
    blocks = _blocks(hidden, slots)
    flags = resets.to(y.dtype)
    before_reset: dict[int, Tensor] = {}
    s = s0
    for k in range(steps):
        if save and any_reset[k]:
            before_reset[k] = slot_data.clone()
        torch.mm(s, recurrent_t, out=z)
        act, partner, c_next = y, y, y  # unused by the tanh-RNN
        if lstm_buffers is not None:
            row = k if save else k % 2
            act = lstm_buffers[0][row if save else 0]
            partner, c_next = lstm_buffers[1][row], lstm_buffers[1][k + 1 if save else 1 - row]
        _forward_step[(batch,)](
            xp[k], z, flags[k], entering[k], slot_data, act, partner, c_next, key,
            score_vector, query_bias, e[k if save else 0], attention[k], history[k],
            targets[k], evicted[k] if evicted is not None else y, y[k], k % nu, H=hidden,
            N=slots, NU=nu, G=xp.shape[2], LSTM=lstm_buffers is not None,
            NORMALISED=uniform_share is not None,
            UNIFORM=uniform_share if uniform_share is not None else 0.0, SAVE=save, **blocks)
        s = y[k]
    return before_reset


@triton.jit
def _dsigmoid(grad, y):  # type: ignore[no-untyped-def]
    return grad * (1.0 - y) * y


@triton.jit
def _gates_backward(dh, h, dc_ptr, act_ptr, partner_ptr, dz_ptr, cols, col_ok,
                    H: tl.constexpr, LSTM: tl.constexpr):  # type: ignore[no-untyped-def]
    """The base's backward: the gradient of its pre-activations into ``dz``; returns that of
    ``c_{k-1}`` (the LSTM's; zeros for the tanh-RNN)."""
    if LSTM:
        i = tl.load(act_ptr + cols, mask=col_ok, other=0.0)
        f = tl.load(act_ptr + H + cols, mask=col_ok, other=0.0)
        g_sigmoid = tl.load(act_ptr + 2 * H + cols, mask=col_ok, other=0.0)
        o = tl.load(act_ptr + 3 * H + cols, mask=col_ok, other=0.0)
        g = tl.load(partner_ptr + cols, mask=col_ok, other=0.0)
        c_prev = tl.load(partner_ptr + H + cols, mask=col_ok, other=0.0)
        i_twice = tl.load(partner_ptr + 2 * H + cols, mask=col_ok, other=0.0)
        tanh_c = tl.load(partner_ptr + 3 * H + cols, mask=col_ok, other=0.0)
        dc = dh * o * (1.0 - tanh_c * tanh_c) + tl.load(dc_ptr + cols, mask=col_ok, other=0.0)
        tl.store(dz_ptr + cols, _dsigmoid(dc * g, i), mask=col_ok)
        tl.store(dz_ptr + H + cols, _dsigmoid(dc * c_prev, f), mask=col_ok)
        tl.store(dz_ptr + 2 * H + cols, _dsigmoid(dc * i_twice, g_sigmoid), mask=col_ok)
        tl.store(dz_ptr + 3 * H + cols, _dsigmoid(tanh_c * dh, o), mask=col_ok)
        return dc * f
    # the doubled pre-activation: d tanh(z / 2) / dz = (1 - h²) / 2
    tl.store(dz_ptr + cols, dh * (1.0 - h * h) * 0.5, mask=col_ok)
    return tl.zeros_like(dh)


@triton.jit
def _backward_step(ds_ptr, reset_next_ptr, g_y_ptr, reset_ptr, dc_in_ptr, dc_out_ptr, slot_ptr,
                   grad_ptr, attention_ptr, e_ptr, d_logits_ptr, key_ptr, score_ptr, dz_ptr,
                   d_keys_ptr, h_ptr, target_ptr, evicted_ptr, act_ptr, partner_ptr, p,
                   H: tl.constexpr, N: tl.constexpr, G: tl.constexpr, LSTM: tl.constexpr,
                   HAS_NEXT: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_N: tl.constexpr):  # type: ignore[no-untyped-def]
    """Step ``k``'s backward for batch item ``program_id(0)``: ``ds_ptr`` holds
    ``dz_{k+1} W`` (unless ``k`` is the last step), ``grad_ptr`` the gradient of the slots'
    ``[m, 2 U_a m, score]`` after step ``k``, ``slot_ptr`` the slots after step ``k``; both
    are taken back to before it."""
    b = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    col_ok = cols < H
    rows = tl.arange(0, BLOCK_N)
    row_ok, slot_ok = rows <= N, rows < N
    tile_ok = row_ok[:, None] & col_ok[None, :]
    ds = tl.load(g_y_ptr + b * H + cols, mask=col_ok, other=0.0)
    if HAS_NEXT:  # nothing crosses the reset of step k + 1
        ds = tl.where(tl.load(reset_next_ptr + b) != 0, 0.0,
                      tl.load(ds_ptr + b * H + cols, mask=col_ok, other=0.0)) + ds
    slot_row = slot_ptr + b * ((N + 1) * (2 * H + 16)) + rows[:, None] * (2 * H + 16)
    content = tl.load(slot_row + cols[None, :], mask=tile_ok, other=0.0)
    grad_row = grad_ptr + b * ((N + 1) * (2 * H + 1)) + rows[:, None] * (2 * H + 1)
    g_content = tl.load(grad_row + cols[None, :], mask=tile_ok, other=0.0)
    g_keys = tl.load(grad_row + H + cols[None, :], mask=tile_ok, other=0.0)
    g_score = tl.load(grad_ptr + b * ((N + 1) * (2 * H + 1)) + rows * (2 * H + 1) + 2 * H,
                      mask=row_ok, other=0.0)
    # The attention: softmax, then the sigmoid of keys plus query (d_pre = dlogit σ').
    weights = tl.load(attention_ptr + b * N + rows, mask=slot_ok, other=0.0)
    d_weights = tl.sum(content * ds[None, :], axis=1)
    d_logits = weights * (d_weights - tl.sum(weights * d_weights, axis=0))
    tl.store(d_logits_ptr + b * N + rows, d_logits, mask=slot_ok)
    e = tl.load(e_ptr + b * N * H + rows[:, None] * H + cols[None, :],
                mask=slot_ok[:, None] & col_ok[None, :], other=0.0)
    d_pre = _dsigmoid(d_logits[:, None], e)
    score_vector = tl.load(score_ptr + cols, mask=col_ok, other=0.0)
    dz_query = tl.sum(d_pre, axis=0) * score_vector
    g_keys = g_keys + d_pre * score_vector[None, :]
    g_content = g_content + weights[:, None] * ds[None, :]
    # h_k, in slot p: its gradient through the read, its key and s_k = h_k + read.
    d_key_h = _row(g_keys, rows, p)
    tl.store(d_keys_ptr + b * H + cols, d_key_h, mask=col_ok)
    key = tl.load(key_ptr + cols[:, None] * H + cols[None, :],
                  mask=col_ok[:, None] & col_ok[None, :], other=0.0)
    dh = ds + _row(g_content, rows, p) + tl.sum(key * d_key_h[:, None], axis=0)
    h = _row(content, rows, p)
    tl.store(h_ptr + b * H + cols, h, mask=col_ok)
    # Undo the screening: the candidate goes back from its target to p with the gradient it
    # gathered there; the target gets back what it held, which had no gradient from later.
    target = tl.load(target_ptr + b)
    at_p, at_target = (rows == p)[:, None], (rows == target)[:, None]
    g_content = tl.where(at_p, _row(g_content, rows, target)[None, :],
                         tl.where(at_target, 0.0, g_content))
    g_keys = tl.where(at_p, _row(g_keys, rows, target)[None, :], tl.where(at_target, 0.0, g_keys))
    g_score = tl.where(rows == p, _entry(g_score, rows, target),
                       tl.where(rows == target, 0.0, g_score))
    evicted = tl.load(evicted_ptr + b * (2 * H + 16) + cols, mask=col_ok, other=0.0)
    content = tl.where(at_p, _row(content, rows, target)[None, :],
                       tl.where(at_target, evicted[None, :], content))
    dc = _gates_backward(dh, h, dc_in_ptr + b * H, act_ptr + b * 4 * H,
                         partner_ptr + b * 4 * H, dz_ptr + b * (G + H), cols, col_ok, H, LSTM)
    tl.store(dz_ptr + b * (G + H) + G + cols, dz_query, mask=col_ok)
    reset = tl.load(reset_ptr + b) != 0  # nothing crosses the reset of step k
    tl.debug_barrier()  # every thread has read the rows it is about to overwrite
    tl.store(dc_out_ptr + b * H + cols, tl.where(reset, 0.0, dc), mask=col_ok)
    tl.store(grad_row + cols[None, :], tl.where(reset, 0.0, g_content), mask=tile_ok)
    tl.store(grad_row + H + cols[None, :], tl.where(reset, 0.0, g_keys), mask=tile_ok)
    tl.store(grad_ptr + b * ((N + 1) * (2 * H + 1)) + rows * (2 * H + 1) + 2 * H,
             tl.where(reset, 0.0, g_score), mask=row_ok)
    tl.store(slot_row + cols[None, :], content, mask=tile_ok)


def backward_loop(g_y: Tensor | None, g_c: Tensor | None, resets: Tensor,
                  before_reset: dict[int, Tensor], recurrent: Tensor, key: Tensor,
                  score_vector: Tensor, attention: Tensor, e: Tensor, targets: Tensor,
                  evicted: Tensor, slot_data: Tensor, grad: Tensor, dz: Tensor,
                  d_logits: Tensor, d_keys_h: Tensor, h: Tensor,
                  lstm_buffers: tuple[Tensor, Tensor] | None, nu: int
                  ) -> tuple[Tensor, Tensor | None]:
    """The engine's backward loop (``_screened_backward_loop``) through the kernels, over its
    buffers; returns the gradients of ``s0`` and ``c0`` (``None`` for the tanh-RNN)."""
    steps, batch, slots = attention.shape
    hidden = key.shape[0]
    blocks = _blocks(hidden, slots)
    flags = resets.to(h.dtype)
    g_y = g_y.contiguous() if g_y is not None else h.new_zeros(steps, batch, hidden)
    dc = [g_c.contiguous() if g_c is not None else h.new_zeros(batch, hidden),
          h.new_empty(batch, hidden)]
    ds = h.new_zeros(batch, hidden)
    for k in reversed(range(steps)):
        act, partner = (lstm_buffers[0][k], lstm_buffers[1][k]) if lstm_buffers else (h, h)
        _backward_step[(batch,)](
            ds, flags[min(k + 1, steps - 1)], g_y[k], flags[k], dc[0], dc[1], slot_data, grad,
            attention[k], e[k], d_logits[k], key, score_vector, dz[k], d_keys_h[k], h[k],
            targets[k], evicted[k], act, partner, k % nu, H=hidden, N=slots,
            G=dz.shape[2] - hidden, LSTM=lstm_buffers is not None, HAS_NEXT=k + 1 < steps,
            **blocks)
        dc.reverse()
        if k in before_reset:
            slot_data.copy_(before_reset[k])
        torch.mm(dz[k], recurrent, out=ds)
    ds = torch.where(resets[0].unsqueeze(1), 0.0, ds)  # nothing crosses the reset of step 0
    return ds, dc[0] if lstm_buffers is not None else None

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
  ``2 U_a h_k`` (an ``H × H`` product, :data:`KEY_CHUNK` columns of ``h_k`` at a time,
  read back from the output's row); the attention (sigmoid of keys plus
  query, scores, the masked softmax, the read, ``s_k = h_k + \text{read}``) and the attention
  received by S added to its scores.

A step of the backward is one kernel (the attention's, the base's and the slot moves'
backward, the reset's cut) and cuBLAS ``dz_k W`` for the previous macro-state's gradient.
The slots' rows are loaded whole into registers, changed there and stored once (after a
barrier, so that no thread overwrites what another has still to read). On a reset step the
forward also copies the slots (saved for the backward) and the backward copies them back.

A rollout's step (:func:`rollout_step`, no autograd, Algorithm 1's screening) skips the
chunk's set-up: cuBLAS gives the incoming memory's keys and ``s W^\top``, and one kernel goes
from the state's fields (S oldest first, R) to the new state's and the traces.

On a GPU a program takes one batch item; through the interpreter, whose cost is per program
and per op, a block of them (:data:`INTERPRETER_BATCH_BLOCK`).

Limits: the hidden size up to :data:`MAX_HIDDEN` and ``ν + ρ + 1`` slots up to
:data:`MAX_SLOTS` (register tiles); the engine falls back above them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from rlmem.cells.attention import Weights

MAX_HIDDEN = 256
"""The largest hidden size the kernels hold in registers (the slots' ``(ν + ρ + 1) × H``
tiles; the key product goes by chunks): compiled for sm_90, float32 at ``H = 256`` and
``ν = ρ = 5`` spills no register (``tests/cells/test_screened_kernels_compile.py``)."""
KEY_CHUNK = 32
"""Columns of the vector a step of the key product (:func:`_key_product`) takes at a time."""
MAX_SLOTS = 64
"""The most slots (``ν + ρ`` and the scratch slot) the kernels hold in registers."""
PAD = 16
"""Columns after ``[m, 2 U_a m]`` in a slot's row (the engine's ``_PAD``): score, mask, rank,
episode step, padding."""


INTERPRETER_BATCH_BLOCK = 16
"""Batch items per program through the interpreter, whose cost is per program and per op
(on a GPU a program takes one batch item, its slots in registers)."""


def uncovered(hidden: int, slots: int) -> str | None:
    """Why the kernels cannot take ``hidden`` and ``slots`` (``ν + ρ``), or ``None``."""
    if hidden > MAX_HIDDEN:
        return f"hidden size {hidden} above the kernels' {MAX_HIDDEN}"
    if slots + 1 > MAX_SLOTS:
        return f"{slots} slots (ν + ρ) above the kernels' {MAX_SLOTS - 1}"
    return None


def step_blocks(hidden: int, slots: int, batch_block: int) -> dict[str, int]:
    """The block sizes and warps of a step's kernels for ``hidden`` and ``slots`` (``ν + ρ``),
    ``batch_block`` items a program."""
    block_h = max(16, triton.next_power_of_2(hidden))
    block_k = min(block_h, KEY_CHUNK)
    # Warps enough that a thread holds some 8 values of a key product's chunk.
    warps = min(16, max(4, block_h * block_k // (32 * 8)))
    return {"BLOCK_B": batch_block, "BLOCK_H": block_h,
            "BLOCK_N": triton.next_power_of_2(slots + 1), "BLOCK_K": block_k,
            "num_warps": warps}


def _launch(like: Tensor, batch: int, hidden: int,
            slots: int) -> tuple[tuple[int], dict[str, int]]:
    """The grid and the block sizes of a step's kernel."""
    block_b = 1 if like.device.type == "cuda" else min(INTERPRETER_BATCH_BLOCK,
                                                       triton.next_power_of_2(batch))
    return (triton.cdiv(batch, block_b),), step_blocks(hidden, slots, block_b)


@triton.jit
def _key_product(key_ptr, vector_ptr, items, item_ok, cols, col_ok, H: tl.constexpr,
                 BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
                 TRANSPOSED: tl.constexpr):
    """``v K^\top`` (or ``v K``, ``TRANSPOSED``) for the items' rows ``v`` ``(B, H)`` of
    ``vector_ptr`` (stored by this program, behind a barrier) and ``K`` the ``H × H`` key
    weights, a chunk of ``BLOCK_K`` columns of ``v`` at a time: the whole ``H × H`` tile
    would take a thread's registers (ptxas spills it at ``H = 128`` in float64)."""
    total = tl.zeros((BLOCK_B, BLOCK_H), key_ptr.dtype.element_ty)
    for start in range(0, BLOCK_H, BLOCK_K):
        part = start + tl.arange(0, BLOCK_K)
        part_ok = part < H
        vector = tl.load(vector_ptr + items[:, None] * H + part[None, :],
                         mask=item_ok[:, None] & part_ok[None, :], other=0.0)
        if TRANSPOSED:  # K[part, cols], its rows read whole
            key = tl.load(key_ptr + part[:, None] * H + cols[None, :],
                          mask=part_ok[:, None] & col_ok[None, :], other=0.0)
            total += tl.sum(key[None, :, :] * vector[:, :, None], axis=1)
        else:  # K[cols, part]
            key = tl.load(key_ptr + cols[:, None] * H + part[None, :],
                          mask=col_ok[:, None] & part_ok[None, :], other=0.0)
            total += tl.sum(key[None, :, :] * vector[:, None, :], axis=2)
    return total


@triton.jit
def _block(batch, H: tl.constexpr, N: tl.constexpr, BLOCK_B: tl.constexpr,
           BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr):
    """This program's batch items ``(B,)``, a state's columns ``(H,)`` and the slots' rows
    ``(N + 1,)`` (the scratch slot last), each with its mask (``ok`` ``(B, H)``, ``row_ok``
    ``(B, N + 1)``)."""
    items = tl.program_id(0).to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B)
    item_ok = items < batch
    cols = tl.arange(0, BLOCK_H)
    col_ok = cols < H
    rows = tl.arange(0, BLOCK_N)
    return (items, item_ok, cols, col_ok, item_ok[:, None] & col_ok[None, :], rows,
            item_ok[:, None] & (rows <= N)[None, :])


@triton.jit
def _load_slots(slot_ptr, items, rows, row_ok, cols, col_ok, reset, H: tl.constexpr,
                N: tl.constexpr, NU: tl.constexpr, NORMALISED: tl.constexpr,
                UNIFORM: tl.constexpr):
    """The items' slots as the step finds them, emptied where an item resets (every row zero,
    the mask and rank -inf; a free slot of R ranks at ``UNIFORM`` under normalised
    screening). ``items`` ``(B,)`` masked: ``row_ok`` ``(B, N)``."""
    W: tl.constexpr = 2 * H + 16
    first = items[:, None, None] * ((N + 1) * W) + rows[None, :, None] * W
    tile_ok = row_ok[:, :, None] & col_ok[None, None, :]
    zero = reset[:, None, None]
    content = tl.where(zero, 0.0, tl.load(slot_ptr + first + cols[None, None, :],
                                          mask=tile_ok, other=0.0))
    keys = tl.where(zero, 0.0, tl.load(slot_ptr + first + H + cols[None, None, :],
                                       mask=tile_ok, other=0.0))
    meta = slot_ptr + items[:, None] * ((N + 1) * W) + rows[None, :] * W + 2 * H
    empty = reset[:, None]
    score = tl.where(empty, 0.0, tl.load(meta, mask=row_ok, other=0.0))
    mask = tl.where(empty, float("-inf"), tl.load(meta + 1, mask=row_ok, other=float("-inf")))
    empty_rank = tl.full(rows.shape, float("-inf"), tl.float32)
    if NORMALISED:
        empty_rank = tl.where((rows >= NU) & (rows < N), UNIFORM, empty_rank)
    rank = tl.where(empty, empty_rank[None, :],
                    tl.load(meta + 2, mask=row_ok, other=float("-inf")))
    time = tl.where(empty, 0.0, tl.load(meta + 3, mask=row_ok, other=0.0))
    return content, keys, score, mask, rank, time


@triton.jit
def _store_slots(slot_ptr, items, content, keys, score, mask, rank, time, rows, row_ok, cols,
                 col_ok, H: tl.constexpr, N: tl.constexpr):
    W: tl.constexpr = 2 * H + 16
    first = items[:, None, None] * ((N + 1) * W) + rows[None, :, None] * W
    tile_ok = row_ok[:, :, None] & col_ok[None, None, :]
    tl.debug_barrier()  # every thread has read the rows it is about to overwrite
    tl.store(slot_ptr + first + cols[None, None, :], content, mask=tile_ok)
    tl.store(slot_ptr + first + H + cols[None, None, :], keys, mask=tile_ok)
    meta = slot_ptr + items[:, None] * ((N + 1) * W) + rows[None, :] * W + 2 * H
    tl.store(meta, score, mask=row_ok)
    tl.store(meta + 1, mask, mask=row_ok)
    tl.store(meta + 2, rank, mask=row_ok)
    tl.store(meta + 3, time, mask=row_ok)


@triton.jit
def _screen(content, keys, score, mask, rank, time, rows, p, evicted_ptr, target_ptr,
            items, item_ok, cols, col_ok, H: tl.constexpr, N: tl.constexpr, NU: tl.constexpr,
            SAVE: tl.constexpr):
    """The screening of the oldest state of S (slot ``p``) into R: its target row (the first
    free slot of R, else the first lowest rank, if it ranks above that; else the scratch
    slot ``N``), what that row held (``evicted``, when saving), and the row moved."""
    in_r = ((rows >= NU) & (rows < N))[None, :]
    ranks_r = tl.where(in_r, rank, float("inf"))
    lowest = tl.min(ranks_r, axis=1)
    slot = tl.min(tl.where(in_r & (ranks_r == lowest[:, None]), rows[None, :], 2 * N + 2),
                  axis=1)
    # Rows are picked by a masked sum (one term) or max (exact for -inf too): in the
    # interpreter a call of a helper of ours costs as much as a kernel's dozen ops.
    from_p = (rows == p)[None, :]
    target = tl.where(tl.max(tl.where(from_p, rank, float("-inf")), axis=1) > lowest, slot, N)
    tl.store(target_ptr + items, target.to(tl.int64), mask=item_ok)
    at = rows[None, :] == target[:, None]
    if SAVE:
        row = evicted_ptr + items * (2 * H + 16)
        row_ok = item_ok[:, None] & col_ok[None, :]
        tl.store(row[:, None] + cols[None, :],
                 tl.sum(tl.where(at[:, :, None], content, 0.0), axis=1), mask=row_ok)
        tl.store(row[:, None] + H + cols[None, :],
                 tl.sum(tl.where(at[:, :, None], keys, 0.0), axis=1), mask=row_ok)
        tl.store(row + 2 * H, tl.max(tl.where(at, score, float("-inf")), axis=1), mask=item_ok)
        tl.store(row + 2 * H + 1, tl.max(tl.where(at, mask, float("-inf")), axis=1),
                 mask=item_ok)
        tl.store(row + 2 * H + 2, tl.max(tl.where(at, rank, float("-inf")), axis=1),
                 mask=item_ok)
        tl.store(row + 2 * H + 3, tl.max(tl.where(at, time, float("-inf")), axis=1),
                 mask=item_ok)
    moved = tl.sum(tl.where(from_p[:, :, None], content, 0.0), axis=1)
    content = tl.where(at[:, :, None], moved[:, None, :], content)
    moved = tl.sum(tl.where(from_p[:, :, None], keys, 0.0), axis=1)
    keys = tl.where(at[:, :, None], moved[:, None, :], keys)
    score = tl.where(at, tl.max(tl.where(from_p, score, float("-inf")), axis=1)[:, None], score)
    mask = tl.where(at, tl.max(tl.where(from_p, mask, float("-inf")), axis=1)[:, None], mask)
    rank = tl.where(at, tl.max(tl.where(from_p, rank, float("-inf")), axis=1)[:, None], rank)
    time = tl.where(at, tl.max(tl.where(from_p, time, float("-inf")), axis=1)[:, None], time)
    return content, keys, score, mask, rank, time


@triton.jit
def _gates(xp_ptr, z_ptr, act_ptr, partner_ptr, c_next_ptr, items, ok, reset,
           cols, H: tl.constexpr, G: tl.constexpr,
           LSTM: tl.constexpr):
    """The base's ``h_k`` ``(B, H)`` from its input terms and (unless the item resets) its
    recurrent terms; the LSTM writes its gates and ``[g, c_{k-1}, 2i, tanh c_k]`` for the
    backward, and ``c_k``. Every tanh is :math:`2\\sigma(2x) - 1` of a doubled
    pre-activation (σ written out: a helper's call costs much in the interpreter)."""
    inputs = xp_ptr + items[:, None] * G + cols[None, :]
    recurrent = z_ptr + items[:, None] * (G + H) + cols[None, :]
    cut = reset[:, None]
    if LSTM:
        z_i = tl.load(inputs, mask=ok, other=0.0) + tl.where(
            cut, 0.0, tl.load(recurrent, mask=ok, other=0.0))
        z_f = tl.load(inputs + H, mask=ok, other=0.0) + tl.where(
            cut, 0.0, tl.load(recurrent + H, mask=ok, other=0.0))
        z_g = tl.load(inputs + 2 * H, mask=ok, other=0.0) + tl.where(
            cut, 0.0, tl.load(recurrent + 2 * H, mask=ok, other=0.0))
        z_o = tl.load(inputs + 3 * H, mask=ok, other=0.0) + tl.where(
            cut, 0.0, tl.load(recurrent + 3 * H, mask=ok, other=0.0))
        i = 1.0 / (1.0 + tl.exp(-z_i))
        f = 1.0 / (1.0 + tl.exp(-z_f))
        g_sigmoid = 1.0 / (1.0 + tl.exp(-z_g))
        o = 1.0 / (1.0 + tl.exp(-z_o))
        act = act_ptr + items[:, None] * (4 * H) + cols[None, :]
        partner = partner_ptr + items[:, None] * (4 * H) + cols[None, :]
        c_prev = tl.where(cut, 0.0, tl.load(partner + H, mask=ok, other=0.0))
        g = 2.0 * g_sigmoid - 1.0
        c = f * c_prev + i * g
        tanh_c = 2.0 / (1.0 + tl.exp(-2.0 * c)) - 1.0
        tl.store(act, i, mask=ok)
        tl.store(act + H, f, mask=ok)
        tl.store(act + 2 * H, g_sigmoid, mask=ok)
        tl.store(act + 3 * H, o, mask=ok)
        tl.store(partner, g, mask=ok)
        tl.store(partner + H, c_prev, mask=ok)
        tl.store(partner + 2 * H, 2.0 * i, mask=ok)
        tl.store(partner + 3 * H, tanh_c, mask=ok)
        tl.store(c_next_ptr + items[:, None] * (4 * H) + H + cols[None, :], c, mask=ok)
        h = o * tanh_c
    else:
        z = tl.load(inputs, mask=ok, other=0.0) + tl.where(
            cut, 0.0, tl.load(recurrent, mask=ok, other=0.0))
        h = 2.0 / (1.0 + tl.exp(-z)) - 1.0
    return h


@triton.jit
def _attend(content, keys, mask, query, score_ptr, e_ptr, attention_ptr, items, item_ok, rows,
            cols, col_ok, H: tl.constexpr, N: tl.constexpr, SAVE: tl.constexpr):
    """The attention weights over the ``N`` slots, stored (and ``e``, σ of keys plus query,
    for the backward, when saving)."""
    slot_ok = (rows < N)[None, :]
    e = 1.0 / (1.0 + tl.exp(-(keys + query[:, None, :])))
    if SAVE:
        tl.store(e_ptr + items[:, None, None] * (N * H) + rows[None, :, None] * H
                 + cols[None, None, :], e, mask=(item_ok[:, None] & slot_ok)[:, :, None]
                 & col_ok[None, None, :])
    score_vector = tl.load(score_ptr + cols, mask=col_ok, other=0.0)
    logits = tl.where(slot_ok, tl.sum(e * score_vector[None, None, :], axis=2) + mask,
                      float("-inf"))
    weights = tl.exp(logits - tl.max(logits, axis=1)[:, None])
    weights = weights / tl.sum(weights, axis=1)[:, None]
    tl.store(attention_ptr + items[:, None] * N + rows[None, :], weights,
             mask=item_ok[:, None] & slot_ok)
    return weights


@triton.jit(do_not_specialize=["p"])
def _forward_step(xp_ptr, z_ptr, reset_ptr, entering_ptr, slot_ptr, act_ptr, partner_ptr,
                  c_next_ptr, key_ptr, score_ptr, bias_ptr, e_ptr, attention_ptr, history_ptr,
                  target_ptr, evicted_ptr, y_ptr, p, batch, H: tl.constexpr, N: tl.constexpr,
                  NU: tl.constexpr, G: tl.constexpr, LSTM: tl.constexpr,
                  NORMALISED: tl.constexpr, UNIFORM: tl.constexpr, SAVE: tl.constexpr,
                  BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Step ``k`` for a block of batch items (see the module's docstring); ``p`` is
    ``k mod ν``, the slot of S that holds its oldest state."""
    items, item_ok, cols, col_ok, ok, rows, row_ok = _block(batch, H, N, BLOCK_B, BLOCK_H,
                                                            BLOCK_N)
    reset = tl.load(reset_ptr + items, mask=item_ok, other=0.0) != 0
    content, keys, score, mask, rank, time = _load_slots(
        slot_ptr, items, rows, row_ok, cols, col_ok, reset, H, N, NU, NORMALISED, UNIFORM)
    content, keys, score, mask, rank, time = _screen(
        content, keys, score, mask, rank, time, rows, p, evicted_ptr, target_ptr, items,
        item_ok, cols, col_ok, H, N, NU, SAVE)
    h = _gates(xp_ptr, z_ptr, act_ptr, partner_ptr, c_next_ptr, items, ok, reset, cols, H, G,
               LSTM)
    tl.store(y_ptr + items[:, None] * H + cols[None, :], h, mask=ok)  # read back by chunks
    tl.debug_barrier()
    key_h = _key_product(key_ptr, y_ptr, items, item_ok, cols, col_ok, H, BLOCK_B, BLOCK_H,
                         BLOCK_K, False)  # 2 U_a h_k
    at = (rows == p)[None, :]  # h_k enters S in the slot just vacated
    content = tl.where(at[:, :, None], h[:, None, :], content)
    keys = tl.where(at[:, :, None], key_h[:, None, :], keys)
    score = tl.where(at, 0.0, score)
    mask = tl.where(at, 0.0, mask)
    rank = tl.where(at, 0.0, rank)
    time = tl.where(at, tl.load(entering_ptr + items * 4 + 3, mask=item_ok, other=0.0)[:, None],
                    time)
    # The attention over the N slots (e saved for the backward) and the read Σ z_i m_i.
    query = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)[None, :] + tl.where(
        reset[:, None], 0.0,
        tl.load(z_ptr + items[:, None] * (G + H) + G + cols[None, :], mask=ok, other=0.0))
    weights = _attend(content, keys, mask, query, score_ptr, e_ptr, attention_ptr, items,
                      item_ok, rows, cols, col_ok, H, N, SAVE)
    slot_ok = (rows < N)[None, :]
    y = h + tl.sum(weights[:, :, None] * content, axis=1)
    received = weights
    if NORMALISED:  # relative to the uniform share 1/|M_t|, averaged over the ν steps
        held = tl.sum(tl.where(slot_ok & (mask == 0.0), 1.0, 0.0), axis=1)
        received = weights * (held.to(weights.dtype) / NU)[:, None]
    short = (rows < NU)[None, :]
    score = tl.where(short, score + received, score)
    rank = tl.where(short, rank + received, rank)
    history = history_ptr + items[:, None] * (N * 4) + rows[None, :] * 4
    seen = item_ok[:, None] & slot_ok
    tl.store(history, score, mask=seen)
    tl.store(history + 1, mask, mask=seen)
    tl.store(history + 2, rank, mask=seen)
    tl.store(history + 3, time, mask=seen)
    _store_slots(slot_ptr, items, content, keys, score, mask, rank, time, rows, row_ok, cols,
                 col_ok, H, N)  # behind a barrier: h_k's row of y is read
    tl.store(y_ptr + items[:, None] * H + cols[None, :], y, mask=ok)


def forward_loop(xp: Tensor, s0: Tensor, resets: Tensor, any_reset: list[bool],
                 weights: Weights, buffers: dict[str, Tensor], targets: Tensor, y: Tensor,
                 nu: int, uniform_share: float | None) -> dict[int, Tensor]:
    """The engine's forward loop (``_screened_loop``) through the kernels, over its
    ``buffers`` (``_forward_shapes``: with ``evicted`` when saving for the backward, ``act``
    and ``partner`` for the LSTM base). Returns the slots as they were before each step that
    resets some item, when saving."""
    steps, batch, hidden = y.shape
    slot_data, z, evicted = buffers["slot_data"], buffers["z"], buffers.get("evicted")
    attention, history, e = buffers["attention"], buffers["history"], buffers["e"]
    lstm_buffers = (buffers["act"], buffers["partner"]) if "act" in buffers else None
    slots, save = attention.shape[2], evicted is not None
    grid, blocks = _launch(y, batch, hidden, slots)
    flags, xp, key = resets.to(y.dtype), xp.contiguous(), weights.key.contiguous()
    recurrent_t, entering = weights.recurrent.t(), buffers["entering"]
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
        _forward_step[grid](
            xp[k], z, flags[k], entering[k], slot_data, act, partner, c_next, key,
            weights.score, weights.query_bias, e[k if save else 0], attention[k], history[k],
            targets[k], evicted[k] if evicted is not None else y, y[k], k % nu, batch,
            H=hidden, N=slots, NU=nu, G=xp.shape[2], LSTM=lstm_buffers is not None,
            NORMALISED=uniform_share is not None,
            UNIFORM=uniform_share if uniform_share is not None else 0.0, SAVE=save, **blocks)
        s = y[k]
    return before_reset


@triton.jit
def _gates_backward(dh, h, dc_ptr, act_ptr, partner_ptr, dz_ptr, items, ok, cols,
                    H: tl.constexpr, G: tl.constexpr,
                    LSTM: tl.constexpr):
    """The base's backward: the gradient of its pre-activations into ``dz``; returns that of
    ``c_{k-1}`` (the LSTM's; zeros for the tanh-RNN). σ' = (1 - σ) σ."""
    dz = dz_ptr + items[:, None] * (G + H) + cols[None, :]
    if LSTM:
        act = act_ptr + items[:, None] * (4 * H) + cols[None, :]
        partner = partner_ptr + items[:, None] * (4 * H) + cols[None, :]
        i = tl.load(act, mask=ok, other=0.0)
        f = tl.load(act + H, mask=ok, other=0.0)
        g_sigmoid = tl.load(act + 2 * H, mask=ok, other=0.0)
        o = tl.load(act + 3 * H, mask=ok, other=0.0)
        tanh_c = tl.load(partner + 3 * H, mask=ok, other=0.0)
        dc = dh * o * (1.0 - tanh_c * tanh_c) + tl.load(
            dc_ptr + items[:, None] * H + cols[None, :], mask=ok, other=0.0)
        tl.store(dz, dc * tl.load(partner, mask=ok, other=0.0) * (1.0 - i) * i, mask=ok)
        tl.store(dz + H, dc * tl.load(partner + H, mask=ok, other=0.0) * (1.0 - f) * f,
                 mask=ok)
        tl.store(dz + 2 * H, dc * tl.load(partner + 2 * H, mask=ok, other=0.0)
                 * (1.0 - g_sigmoid) * g_sigmoid, mask=ok)
        tl.store(dz + 3 * H, tanh_c * dh * (1.0 - o) * o, mask=ok)
        dc_prev = dc * f
    else:  # the doubled pre-activation: d tanh(z / 2) / dz = (1 - h²) / 2
        tl.store(dz, dh * (1.0 - h * h) * 0.5, mask=ok)
        dc_prev = tl.zeros_like(dh)
    return dc_prev


@triton.jit
def _attention_backward(content, ds, g_content, g_keys, attention_ptr, e_ptr, d_logits_ptr,
                        score_ptr, items, slot_ok, rows, cols, col_ok, H: tl.constexpr,
                        N: tl.constexpr):
    """The attention's backward from the gradient ``ds`` of ``s_k``: the gradient of the
    logits (stored, for ``2 v_a``'s), of the query's pre-activation (returned) and, added, of
    the slots' contents and keys. Softmax, then σ of keys plus query (``d_pre`` is
    dlogit σ'), each use multiplied by ``2 v_a``."""
    weights = tl.load(attention_ptr + items[:, None] * N + rows[None, :], mask=slot_ok,
                      other=0.0)
    d_weights = tl.sum(content * ds[:, None, :], axis=2)
    d_logits = weights * (d_weights - tl.sum(weights * d_weights, axis=1)[:, None])
    tl.store(d_logits_ptr + items[:, None] * N + rows[None, :], d_logits, mask=slot_ok)
    e = tl.load(e_ptr + items[:, None, None] * (N * H) + rows[None, :, None] * H
                + cols[None, None, :], mask=slot_ok[:, :, None] & col_ok[None, None, :],
                other=0.0)
    d_pre = d_logits[:, :, None] * (1.0 - e) * e
    score_vector = tl.load(score_ptr + cols, mask=col_ok, other=0.0)
    dz_query = tl.sum(d_pre, axis=1) * score_vector[None, :]
    g_keys = g_keys + d_pre * score_vector[None, None, :]
    g_content = g_content + weights[:, :, None] * ds[:, None, :]
    return g_content, g_keys, dz_query


@triton.jit
def _undo_screening(content, g_content, g_keys, g_score, at_p_row, target_ptr, evicted_ptr,
                    items, item_ok, ok, rows, cols, H: tl.constexpr, N: tl.constexpr):
    """Undo a step's screening in the slots and their gradient: the candidate goes back from
    its target to slot p with the gradient it gathered there; the target gets back what it
    held (``evicted``), which had no gradient from later steps."""
    at_p = at_p_row[:, :, None]
    at_target = (rows[None, :] == tl.load(target_ptr + items, mask=item_ok, other=N)[:, None])
    moved = tl.sum(tl.where(at_target[:, :, None], g_content, 0.0), axis=1)
    g_content = tl.where(at_p, moved[:, None, :], tl.where(at_target[:, :, None], 0.0, g_content))
    moved = tl.sum(tl.where(at_target[:, :, None], g_keys, 0.0), axis=1)
    g_keys = tl.where(at_p, moved[:, None, :], tl.where(at_target[:, :, None], 0.0, g_keys))
    moved_score = tl.sum(tl.where(at_target, g_score, 0.0), axis=1)
    g_score = tl.where(at_p_row, moved_score[:, None], tl.where(at_target, 0.0, g_score))
    evicted = tl.load(evicted_ptr + items[:, None] * (2 * H + 16) + cols[None, :], mask=ok,
                      other=0.0)
    moved = tl.sum(tl.where(at_target[:, :, None], content, 0.0), axis=1)
    content = tl.where(at_p, moved[:, None, :],
                       tl.where(at_target[:, :, None], evicted[:, None, :], content))
    return content, g_content, g_keys, g_score


@triton.jit(do_not_specialize=["p"])
def _backward_step(ds_ptr, reset_next_ptr, g_y_ptr, reset_ptr, dc_in_ptr, dc_out_ptr, slot_ptr,
                   grad_ptr, attention_ptr, e_ptr, d_logits_ptr, key_ptr, score_ptr, dz_ptr,
                   d_keys_ptr, h_ptr, target_ptr, evicted_ptr, act_ptr, partner_ptr, p, batch,
                   H: tl.constexpr, N: tl.constexpr, G: tl.constexpr, LSTM: tl.constexpr,
                   HAS_NEXT: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """Step ``k``'s backward for a block of batch items: ``ds_ptr`` holds ``dz_{k+1} W``
    (unless ``k`` is the last step), ``grad_ptr`` the gradient of the slots'
    ``[m, 2 U_a m, score]`` after step ``k``, ``slot_ptr`` the slots after step ``k``; both
    are taken back to before it."""
    items, item_ok, cols, col_ok, ok, rows, row_ok = _block(batch, H, N, BLOCK_B, BLOCK_H,
                                                            BLOCK_N)
    slot_ok = item_ok[:, None] & (rows < N)[None, :]
    tile_ok = row_ok[:, :, None] & col_ok[None, None, :]
    vectors = items[:, None] * H + cols[None, :]
    ds = tl.load(g_y_ptr + vectors, mask=ok, other=0.0)
    if HAS_NEXT:  # nothing crosses the reset of step k + 1
        ds = tl.where(tl.load(reset_next_ptr + items, mask=item_ok, other=0.0)[:, None] != 0,
                      0.0, tl.load(ds_ptr + vectors, mask=ok, other=0.0)) + ds
    slot_row = slot_ptr + items[:, None, None] * ((N + 1) * (2 * H + 16)) + rows[
        None, :, None] * (2 * H + 16) + cols[None, None, :]
    content = tl.load(slot_row, mask=tile_ok, other=0.0)
    grad_row = grad_ptr + items[:, None, None] * ((N + 1) * (2 * H + 1)) + rows[
        None, :, None] * (2 * H + 1) + cols[None, None, :]
    g_content = tl.load(grad_row, mask=tile_ok, other=0.0)
    g_keys = tl.load(grad_row + H, mask=tile_ok, other=0.0)
    score_row = grad_ptr + items[:, None] * ((N + 1) * (2 * H + 1)) + rows[None, :] * (
        2 * H + 1) + 2 * H
    g_score = tl.load(score_row, mask=row_ok, other=0.0)
    g_content, g_keys, dz_query = _attention_backward(
        content, ds, g_content, g_keys, attention_ptr, e_ptr, d_logits_ptr, score_ptr, items,
        slot_ok, rows, cols, col_ok, H, N)
    # h_k, in slot p: its gradient through the read, its key and s_k = h_k + read.
    at_p_row = (rows == p)[None, :]
    at_p = at_p_row[:, :, None]
    d_key_h = tl.sum(tl.where(at_p, g_keys, 0.0), axis=1)
    tl.store(d_keys_ptr + vectors, d_key_h, mask=ok)
    tl.debug_barrier()  # d_key_h is read back by chunks
    dh = ds + tl.sum(tl.where(at_p, g_content, 0.0), axis=1) + _key_product(
        key_ptr, d_keys_ptr, items, item_ok, cols, col_ok, H, BLOCK_B, BLOCK_H, BLOCK_K, True)
    h = tl.sum(tl.where(at_p, content, 0.0), axis=1)
    tl.store(h_ptr + vectors, h, mask=ok)
    content, g_content, g_keys, g_score = _undo_screening(
        content, g_content, g_keys, g_score, at_p_row, target_ptr, evicted_ptr, items, item_ok,
        ok, rows, cols, H, N)
    dc = _gates_backward(dh, h, dc_in_ptr, act_ptr, partner_ptr, dz_ptr, items, ok, cols, H, G,
                         LSTM)
    tl.store(dz_ptr + items[:, None] * (G + H) + G + cols[None, :], dz_query, mask=ok)
    cut = tl.load(reset_ptr + items, mask=item_ok, other=0.0) != 0  # the reset of step k
    tl.debug_barrier()  # every thread has read the rows it is about to overwrite
    tl.store(dc_out_ptr + vectors, tl.where(cut[:, None], 0.0, dc), mask=ok)
    tl.store(grad_row, tl.where(cut[:, None, None], 0.0, g_content), mask=tile_ok)
    tl.store(grad_row + H, tl.where(cut[:, None, None], 0.0, g_keys), mask=tile_ok)
    tl.store(score_row, tl.where(cut[:, None], 0.0, g_score), mask=row_ok)
    tl.store(slot_row, content, mask=tile_ok)


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
    grid, blocks = _launch(h, batch, hidden, slots)
    flags = resets.to(h.dtype)
    g_y = g_y.contiguous() if g_y is not None else h.new_zeros(steps, batch, hidden)
    dc = [g_c.contiguous() if g_c is not None else h.new_zeros(batch, hidden),
          h.new_empty(batch, hidden)]
    ds = h.new_zeros(batch, hidden)
    for k in reversed(range(steps)):
        act, partner = (lstm_buffers[0][k], lstm_buffers[1][k]) if lstm_buffers else (h, h)
        _backward_step[grid](
            ds, flags[min(k + 1, steps - 1)], g_y[k], flags[k], dc[0], dc[1], slot_data, grad,
            attention[k], e[k], d_logits[k], key, score_vector, dz[k], d_keys_h[k], h[k],
            targets[k], evicted[k], act, partner, k % nu, batch, H=hidden, N=slots,
            G=dz.shape[2] - hidden, LSTM=lstm_buffers is not None, HAS_NEXT=k + 1 < steps,
            **blocks)
        dc.reverse()
        if k in before_reset:
            slot_data.copy_(before_reset[k])
        torch.mm(dz[k], recurrent, out=ds)
    ds = torch.where(resets[0].unsqueeze(1), 0.0, ds)  # nothing crosses the reset of step 0
    return ds, dc[0] if lstm_buffers is not None else None


# --- a rollout's step: the state's own layout in and out, no chunk set-up -------------------


@triton.jit
def _rollout_memory(short_ptr, score_s_ptr, valid_s_ptr, time_s_ptr, relevant_ptr, score_r_ptr,
                    valid_r_ptr, time_r_ptr, keys_ptr, items, item_ok, rows, cols, col_ok, keep,
                    H: tl.constexpr, N: tl.constexpr, NU: tl.constexpr):
    """The memory the step attends over before ``h_t`` enters, as ``(B, N)`` tiles in the
    traces' order: S shifted by one (row ``i < ν - 1`` holds the state's ``i + 1``; its oldest
    leaves), then R; keys ``2 U_a m`` from ``keys`` ``(B, N, H)``, the incoming memory's.
    Empty where an item resets (``keep`` false)."""
    in_s, in_r = (rows < NU - 1)[None, :], ((rows >= NU) & (rows < N))[None, :]
    from_s = item_ok[:, None] & keep[:, None] & in_s
    from_r = item_ok[:, None] & keep[:, None] & in_r
    s_row = items[:, None] * NU + rows[None, :] + 1
    r_row = items[:, None] * (N - NU) + rows[None, :] - NU
    valid = (tl.load(valid_s_ptr + s_row, mask=from_s, other=0) != 0) | (
        tl.load(valid_r_ptr + r_row, mask=from_r, other=0) != 0)
    score = tl.load(score_s_ptr + s_row, mask=from_s, other=0.0) + tl.load(
        score_r_ptr + r_row, mask=from_r, other=0.0)
    time = tl.load(time_s_ptr + s_row, mask=from_s, other=0) + tl.load(
        time_r_ptr + r_row, mask=from_r, other=0)
    tile_s = from_s[:, :, None] & col_ok[None, None, :]
    tile_r = from_r[:, :, None] & col_ok[None, None, :]
    content = tl.load(short_ptr + s_row[:, :, None] * H + cols[None, None, :], mask=tile_s,
                      other=0.0) + tl.load(relevant_ptr + r_row[:, :, None] * H
                                           + cols[None, None, :], mask=tile_r, other=0.0)
    key_row = items[:, None] * N + tl.where(in_s, rows[None, :] + 1, rows[None, :])
    keys = tl.load(keys_ptr + key_row[:, :, None] * H + cols[None, None, :],
                   mask=tile_s | tile_r, other=0.0)
    return content, keys, score, valid, time


@triton.jit
def _rollout_screen(content, keys, score, valid, time, short_ptr, score_s_ptr, valid_s_ptr,
                    time_s_ptr, keys_ptr, items, item_ok, rows, cols, col_ok, keep,
                    H: tl.constexpr, N: tl.constexpr, NU: tl.constexpr):
    """Algorithm 1's screening of the state's oldest member of S into R (:func:`screen`): a
    free slot of R ranks -inf, so the first free slot, else the first lowest score, is the
    target; the candidate enters if it holds a state that ranks above it."""
    in_r = ((rows >= NU) & (rows < N))[None, :]
    ranks = tl.where(in_r, tl.where(valid, score, float("-inf")), float("inf"))
    lowest = tl.min(ranks, axis=1)
    slot = tl.min(tl.where(in_r & (ranks == lowest[:, None]), rows[None, :], 2 * N), axis=1)
    here = item_ok & keep
    oldest = items * NU
    enter = (tl.load(valid_s_ptr + oldest, mask=here, other=0) != 0) & (
        tl.load(score_s_ptr + oldest, mask=here, other=0.0) > lowest)
    write = (rows[None, :] == slot[:, None]) & enter[:, None]
    vector_ok = here[:, None] & col_ok[None, :]
    content = tl.where(write[:, :, None], tl.load(
        short_ptr + oldest[:, None] * H + cols[None, :], mask=vector_ok, other=0.0)[:, None, :],
        content)
    keys = tl.where(write[:, :, None], tl.load(
        keys_ptr + (items * N)[:, None] * H + cols[None, :], mask=vector_ok,
        other=0.0)[:, None, :], keys)
    score = tl.where(write, tl.load(score_s_ptr + oldest, mask=here, other=0.0)[:, None], score)
    time = tl.where(write, tl.load(time_s_ptr + oldest, mask=here, other=0)[:, None], time)
    return content, keys, score, valid | write, time


@triton.jit
def _rollout_store(y, content, score, valid, time, weights, y_ptr, short_ptr, score_s_ptr,
                   valid_s_ptr, time_s_ptr, relevant_ptr, score_r_ptr, valid_r_ptr,
                   time_r_ptr, slot_time_ptr, items, item_ok, ok, rows, cols, col_ok,
                   H: tl.constexpr, N: tl.constexpr, NU: tl.constexpr):
    """The new state's memory in its layout (S oldest first, R) and the step's traces; the
    attention received by S added to its scores."""
    tl.store(y_ptr + items[:, None] * H + cols[None, :], y, mask=ok)
    in_s = item_ok[:, None] & (rows < NU)[None, :]
    in_r = item_ok[:, None] & ((rows >= NU) & (rows < N))[None, :]
    s_row = items[:, None] * NU + rows[None, :]
    r_row = items[:, None] * (N - NU) + rows[None, :] - NU
    tl.store(short_ptr + s_row[:, :, None] * H + cols[None, None, :], content,
             mask=in_s[:, :, None] & col_ok[None, None, :])
    tl.store(relevant_ptr + r_row[:, :, None] * H + cols[None, None, :], content,
             mask=in_r[:, :, None] & col_ok[None, None, :])
    tl.store(score_s_ptr + s_row, score + weights, mask=in_s)
    tl.store(score_r_ptr + r_row, score, mask=in_r)
    tl.store(valid_s_ptr + s_row, valid, mask=in_s)
    tl.store(valid_r_ptr + r_row, valid, mask=in_r)
    tl.store(time_s_ptr + s_row, time, mask=in_s)
    tl.store(time_r_ptr + r_row, time, mask=in_r)
    tl.store(slot_time_ptr + items[:, None] * N + rows[None, :], tl.where(valid, time, -1),
             mask=in_s | in_r)


@triton.jit
def _rollout_step(xp_ptr, z_ptr, keys_in_ptr, reset_ptr, t_ptr, short_in, score_s_in,
                  valid_s_in, time_s_in, relevant_in, score_r_in, valid_r_in, time_r_in,
                  short_out, score_s_out, valid_s_out, time_s_out, relevant_out, score_r_out,
                  valid_r_out, time_r_out, act_ptr, partner_ptr, c_next_ptr, key_ptr,
                  score_ptr, bias_ptr, attention_ptr, slot_time_ptr, y_ptr, t_out_ptr, batch,
                  H: tl.constexpr, N: tl.constexpr, NU: tl.constexpr, G: tl.constexpr,
                  LSTM: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr,
                  BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """One step of the cell (:meth:`RelevancyScreening.step`, Algorithm 1's screening) for a
    block of batch items, from the state's fields (``_in``: S's content, score, valid, time,
    then R's) to the new state's (``_out``)."""
    items, item_ok, cols, col_ok, ok, rows, _ = _block(batch, H, N, BLOCK_B, BLOCK_H, BLOCK_N)
    reset = tl.load(reset_ptr + items, mask=item_ok, other=0) != 0
    keep = ~reset
    content, keys, score, valid, time = _rollout_memory(
        short_in, score_s_in, valid_s_in, time_s_in, relevant_in, score_r_in, valid_r_in,
        time_r_in, keys_in_ptr, items, item_ok, rows, cols, col_ok, keep, H, N, NU)
    content, keys, score, valid, time = _rollout_screen(
        content, keys, score, valid, time, short_in, score_s_in, valid_s_in, time_s_in,
        keys_in_ptr, items, item_ok, rows, cols, col_ok, keep, H, N, NU)
    h = _gates(xp_ptr, z_ptr, act_ptr, partner_ptr, c_next_ptr, items, ok, reset, cols, H, G,
               LSTM)
    tl.store(y_ptr + items[:, None] * H + cols[None, :], h, mask=ok)  # read back by chunks
    tl.debug_barrier()
    at = (rows == NU - 1)[None, :]  # h_t enters S as its newest member
    content = tl.where(at[:, :, None], h[:, None, :], content)
    keys = tl.where(at[:, :, None], _key_product(
        key_ptr, y_ptr, items, item_ok, cols, col_ok, H, BLOCK_B, BLOCK_H, BLOCK_K,
        False)[:, None, :], keys)
    t = tl.where(reset, 0, tl.load(t_ptr + items, mask=item_ok, other=0))
    tl.store(t_out_ptr + items, t + 1, mask=item_ok)
    score = tl.where(at, 0.0, score)
    valid = valid | at
    time = tl.where(at, t[:, None], time)
    query = tl.load(bias_ptr + cols, mask=col_ok, other=0.0)[None, :] + tl.where(
        reset[:, None], 0.0,
        tl.load(z_ptr + items[:, None] * (G + H) + G + cols[None, :], mask=ok, other=0.0))
    weights = _attend(content, keys, tl.where(valid, 0.0, float("-inf")), query, score_ptr,
                      key_ptr, attention_ptr, items, item_ok, rows, cols, col_ok, H, N, False)
    tl.debug_barrier()  # every thread has read h_t's row of y
    _rollout_store(h + tl.sum(weights[:, :, None] * content, axis=1), content, score, valid,
                   time, weights, y_ptr, short_out, score_s_out, valid_s_out, time_s_out,
                   relevant_out, score_r_out, valid_r_out, time_r_out, slot_time_ptr, items,
                   item_ok, ok, rows, cols, col_ok, H, N, NU)


def rollout_step(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor | None,
                 memory: tuple[Tensor, ...], t0: Tensor, resets: Tensor
                 ) -> tuple[Tensor, Tensor | None, Tensor, tuple[Tensor, ...], Tensor, Tensor]:
    """One step of the cell without autograd (Algorithm 1's screening), from the state's
    fields to the new state's: the output ``(B, H)``, ``c``, ``t``, the eight fields of the
    memory (``memory``'s order: S's content, score, valid, time, then R's) and the traces
    ``attention`` and ``slot_time`` ``(B, ν+ρ)``. cuBLAS gives the incoming memory's keys and
    the recurrent terms; one kernel does the rest.

    Shapes: xp ``(B, G)``; the rest as the state's fields; resets ``(B,)`` bool.
    """
    batch, hidden = s0.shape
    memory = tuple(field.contiguous() for field in memory)
    nu, slots = memory[0].shape[1], memory[0].shape[1] + memory[4].shape[1]
    keys = torch.matmul(torch.cat([memory[0], memory[4]], dim=1), weights.key.t())
    z = torch.mm(s0, weights.recurrent.t())
    act = partner = c_next = xp  # unused by the tanh-RNN
    if c0 is not None:
        act, partner, c_next = xp.new_empty(3, batch, 4, hidden).unbind(0)
        partner[:, 1] = c0
    new_memory = tuple(torch.empty_like(field) for field in memory)
    attention = xp.new_empty(batch, slots)
    slot_time, t = t0.new_empty(batch, slots), torch.empty_like(t0)
    y = torch.empty_like(s0)
    grid, blocks = _launch(y, batch, hidden, slots)
    _rollout_step[grid](
        xp.contiguous(), z, keys, resets, t0.contiguous(), *memory, *new_memory, act, partner,
        c_next, weights.key.contiguous(), weights.score, weights.query_bias, attention,
        slot_time, y, t, batch, H=hidden, N=slots, NU=nu, G=xp.shape[1], LSTM=c0 is not None,
        **blocks)
    c = c_next[:, 1] if c0 is not None else None
    return y, c, t, new_memory, attention, slot_time

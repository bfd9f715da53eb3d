r"""MemLSTM's Triton kernels: full attention over the episode's states, a step at a time,
forward and backward, between cuBLAS's matmuls.

The math is :mod:`rlmem.cells._engines.full_attention`'s loops (the doubled form of
:class:`rlmem.cells.attention.Weights`; the LSTM base of
:class:`~rlmem.cells._engines.base_recurrence.BaseRecurrence`), over the same windows: step k
reads ``incoming`` slots of the incoming memory and the chunk's states ``first .. end - 1``.
A step forward is four launches: :math:`z = [x_p, 2b_a] + s W^\top` (``addmm_``), the LSTM base
(:func:`_lstm_forward`), the new state's key :math:`U_a h_k` (``mm``) and the attention
(:func:`_attention_forward`, one program per batch item over the whole window). A step backward
is four: :func:`_attention_backward`, the key's gradient into :math:`h_k` (``mm``),
:func:`_lstm_backward`, and :math:`dz\,W` (``mm``), which the next step back reads.

A rollout's step without autograd (:func:`rollout_step`) works on the state's own layout
instead, with no chunk set-up: ``addmm_``, the LSTM base, the key (``mm``) and
:func:`_rollout_attention`, which writes the new memory (h_k into slot ``t mod capacity``) and
attends over its valid slots.

The attention kernels hold a window of ``BLOCK_W × BLOCK_H`` values in registers; a chunk whose
widest window or hidden size exceeds :data:`MOST` runs the Python loops (:func:`fits` says
why). They use no ``tl.dot`` (products and sums over blocks); the blocks are powers of two,
at least 16, the excess masked.

Resets, by :mod:`rlmem.cells.resets`' rule: a step's kernels write the next step's incoming
state zero where the env resets there, and zero ``c_{k-1}`` where it resets at step k; going
back, the gradients arriving from a step where the env resets are dropped. Nothing in the loops
reads the device from the host.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from torch import Tensor

MOST = 32768
"""The most window entries × hidden units an attention program holds (``BLOCK_W · BLOCK_H``)."""

ELEMENTWISE = 512
"""Neurons (of a step's ``B · H``) per program of the LSTM kernels."""


def blocks(widest: int, hidden: int) -> tuple[int, int]:
    """``BLOCK_W, BLOCK_H``: powers of two that hold the widest window and the hidden units, at
    least 16 (no block of a handful: the shapes every GPU compiler handles)."""
    return (max(16, triton.next_power_of_2(widest)), max(16, triton.next_power_of_2(hidden)))


def fits(widest: int, hidden: int) -> str | None:
    """Why a chunk whose widest window reads ``widest`` entries cannot run the kernels, or
    ``None`` where it can."""
    block_w, block_h = blocks(widest, hidden)
    if block_w * block_h > MOST:
        return (f"a window of {widest} states of hidden size {hidden} exceeds what one "
                f"program holds ({MOST} values)")
    return None


class Window(NamedTuple):
    """What the attention kernels read: the memory and the chunk's states, with their keys."""

    memory: Tensor
    """The incoming memory, contiguous ``(B, capacity, H)`` (its first ``n_in`` slots read)."""
    keys: Tensor
    """Their keys, likewise."""
    chunk: Tensor
    """``(B, T, H)``: the chunk's states h_k."""
    chunk_keys: Tensor
    """``(B, T, H)``: their keys."""
    windows: list[tuple[int, int, int]]
    """Per step: incoming slots read, first chunk entry, end (``full_attention._windows``)."""


class KernelTape(NamedTuple):
    """What the forward loop keeps for the backward loop."""

    window: Window
    act: Tensor
    """``(T, B, 4, H)``: the LSTM's gates, ``BaseRecurrence``'s buffer."""
    partner: Tensor
    """``(T + 1, B, 4, H)``: what each gate is multiplied by, ``BaseRecurrence``'s buffer."""
    resets: Tensor
    """``(T, B)``: 1 where the env resets at step k."""
    z: Tensor
    """``(T, B, 5H)``: the base's pre-activations and the doubled query of every step."""
    weights_full: Tensor
    """``(T, B, n_in + T)``: every step's attention weights, by column."""
    keep_next: Tensor
    """``(T, B)``: 1 where the env does not reset at step k + 1 (0 at the last step)."""


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _sum(x, axis: tl.constexpr):
    # tl.reduce with Triton's own combine rather than tl.sum (likewise _max): tl.sum is itself
    # a jit function, which Triton's interpreter cannot call where Triton was imported before
    # TRITON_INTERPRET=1 was set (a test process); the interpreter sums this one in numpy.
    return tl.reduce(x, axis, tl.standard._sum_combine)


@triton.jit
def _max(x, axis: tl.constexpr):
    return tl.reduce(x, axis, tl.standard._elementwise_max)


@triton.jit
def _lstm_forward(z_ptr, c_prev_ptr, reset_ptr, act_ptr, partner_ptr,
                  c_ptr, h_ptr, h_stride, numel, size, BLOCK: tl.constexpr):
    """The LSTM base of one step (``BaseRecurrence.forward``): ``act = σ(z)``, ``partner =
    [g, c_{k-1}, 2i, tanh c_k]`` (``c_{k-1}`` zero where the env resets), ``c_k`` and
    ``h_k = o ⊙ tanh c_k`` (rows ``h_stride`` apart)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    row = offsets // size
    col = offsets % size
    gate = z_ptr + row * 5 * size + col
    i = _sigmoid(tl.load(gate, mask=mask, other=0.0))
    f = _sigmoid(tl.load(gate + size, mask=mask, other=0.0))
    g_sigmoid = _sigmoid(tl.load(gate + 2 * size, mask=mask, other=0.0))
    o = _sigmoid(tl.load(gate + 3 * size, mask=mask, other=0.0))
    reset = tl.load(reset_ptr + row, mask=mask, other=0.0)
    c_prev = tl.where(reset > 0.0, 0.0, tl.load(c_prev_ptr + offsets + row * 3 * size,
                                                 mask=mask, other=0.0))
    g = 2.0 * g_sigmoid - 1.0
    c = f * c_prev + i * g
    tanh_c = 2.0 * _sigmoid(2.0 * c) - 1.0
    act = act_ptr + row * 4 * size + col
    tl.store(act, i, mask=mask)
    tl.store(act + size, f, mask=mask)
    tl.store(act + 2 * size, g_sigmoid, mask=mask)
    tl.store(act + 3 * size, o, mask=mask)
    partner = partner_ptr + row * 4 * size + col
    tl.store(partner, g, mask=mask)
    tl.store(partner + size, c_prev, mask=mask)
    tl.store(partner + 2 * size, 2.0 * i, mask=mask)
    tl.store(partner + 3 * size, tanh_c, mask=mask)
    tl.store(c_ptr + offsets + row * 3 * size, c, mask=mask)
    tl.store(h_ptr + row * h_stride + col, o * tanh_c, mask=mask)


@triton.jit
def _window(b, incoming, first, width, n_in, slots, steps, size,
            BLOCK_W: tl.constexpr, BLOCK_H: tl.constexpr):
    """A step's window for batch item ``b``: the offsets of its rows in the memory (``(B,
    slots, H)``, as its keys and their gradients) and in the chunk (``(B, T, H)``, likewise),
    each where its mask says, and each entry's column in the step's weights."""
    entry = tl.arange(0, BLOCK_W)
    unit = tl.arange(0, BLOCK_H)
    units = unit[None, :] < size
    is_in = (entry < incoming)[:, None] & units
    chunk_entry = first + entry - incoming
    is_chunk = ((entry >= incoming) & (entry < width))[:, None] & units
    memory_rows = (b * slots + entry[:, None]) * size + unit[None, :]
    chunk_rows = (b * steps + chunk_entry[:, None]) * size + unit[None, :]
    column = tl.where(entry < incoming, entry, n_in + chunk_entry)
    return memory_rows, chunk_rows, is_in, is_chunk, column


@triton.jit(do_not_specialize=["k", "incoming", "first", "width"])
def _attention_forward(z_ptr, mask_ptr, score_ptr, memory_ptr, keys_ptr,
                       chunk_ptr, chunk_keys_ptr, weights_ptr, y_ptr, s_next_ptr,
                       keep_next_ptr, k, incoming, first, width, n_in, slots, steps, size,
                       BLOCK_W: tl.constexpr, BLOCK_H: tl.constexpr):
    """One step's attention for batch item ``b``: ``e_i = σ(q + 2 U_a m_i)``, the softmax of
    ``e_i · 2v_a`` plus the step's mask, ``s_k = h_k + Σ_i w_i m_i``; the weights into their
    columns, ``s_k`` into ``y`` and (zero where the env resets next) the next incoming state."""
    b = tl.program_id(0)
    columns = n_in + steps
    unit = tl.arange(0, BLOCK_H)
    units = unit < size
    memory_rows, chunk_rows, is_in, is_chunk, column = _window(
        b, incoming, first, width, n_in, slots, steps, size, BLOCK_W, BLOCK_H)
    keys = (tl.load(keys_ptr + memory_rows, mask=is_in, other=0.0)
            + tl.load(chunk_keys_ptr + chunk_rows, mask=is_chunk, other=0.0))
    query = tl.load(z_ptr + b * 5 * size + 4 * size + unit, mask=units, other=0.0)
    e = _sigmoid(query[None, :] + 2.0 * keys)
    score = tl.load(score_ptr + unit, mask=units, other=0.0)
    entries = tl.arange(0, BLOCK_W) < width
    penalty = tl.load(mask_ptr + b * columns + column, mask=entries, other=0.0)
    logits = tl.where(entries, _sum(e * score[None, :], 1) + penalty, float("-inf"))
    exp = tl.exp(logits - _max(logits, 0))
    weights = exp / _sum(exp, 0)
    tl.store(weights_ptr + b * columns + column, weights, mask=entries)
    memory = (tl.load(memory_ptr + memory_rows, mask=is_in, other=0.0)
              + tl.load(chunk_ptr + chunk_rows, mask=is_chunk, other=0.0))
    h = tl.load(chunk_ptr + (b * steps + k) * size + unit, mask=units, other=0.0)
    s = h + _sum(weights[:, None] * memory, 0)
    tl.store(y_ptr + b * size + unit, s, mask=units)
    keep = tl.load(keep_next_ptr + b)
    tl.store(s_next_ptr + b * size + unit, tl.where(keep > 0.0, s, 0.0), mask=units)


@triton.jit(do_not_specialize=["incoming", "first", "width"])
def _attention_backward(z_ptr, score_ptr, memory_ptr, keys_ptr, chunk_ptr,
                        chunk_keys_ptr, weights_ptr, grad_y_ptr, carry_ptr, keep_next_ptr,
                        ds_ptr, dz_query_ptr, d_score_ptr, d_memory_ptr, d_keys_ptr,
                        d_chunk_ptr, d_chunk_keys_ptr, incoming, first, width, n_in, slots,
                        steps, size, HAS_GRAD_Y: tl.constexpr, BLOCK_W: tl.constexpr,
                        BLOCK_H: tl.constexpr):
    """One step's attention back, for batch item ``b``: ``ds`` (the gradient of s_k, ``y``'s
    own plus what the next step carried back unless the env resets there), then through the
    weighted sum and the softmax to the entries, their keys, the query and ``2v_a``."""
    b = tl.program_id(0)
    columns = n_in + steps
    unit = tl.arange(0, BLOCK_H)
    units = unit < size
    keep = tl.load(keep_next_ptr + b)
    ds = tl.where(keep > 0.0, tl.load(carry_ptr + b * size + unit, mask=units, other=0.0), 0.0)
    if HAS_GRAD_Y:
        ds += tl.load(grad_y_ptr + b * size + unit, mask=units, other=0.0)
    tl.store(ds_ptr + b * size + unit, ds, mask=units)
    memory_rows, chunk_rows, is_in, is_chunk, column = _window(
        b, incoming, first, width, n_in, slots, steps, size, BLOCK_W, BLOCK_H)
    entries = tl.arange(0, BLOCK_W) < width
    weights = tl.load(weights_ptr + b * columns + column, mask=entries, other=0.0)
    memory = (tl.load(memory_ptr + memory_rows, mask=is_in, other=0.0)
              + tl.load(chunk_ptr + chunk_rows, mask=is_chunk, other=0.0))
    d_weights = _sum(memory * ds[None, :], 1)
    d_logits = weights * (d_weights - _sum(weights * d_weights, 0))
    keys = (tl.load(keys_ptr + memory_rows, mask=is_in, other=0.0)
            + tl.load(chunk_keys_ptr + chunk_rows, mask=is_chunk, other=0.0))
    query = tl.load(z_ptr + b * 5 * size + 4 * size + unit, mask=units, other=0.0)
    e = _sigmoid(query[None, :] + 2.0 * keys)
    d_score = tl.load(d_score_ptr + b * size + unit, mask=units, other=0.0)
    tl.store(d_score_ptr + b * size + unit, d_score + _sum(d_logits[:, None] * e, 0),
             mask=units)
    d_pre = d_logits[:, None] * e * (1.0 - e)
    score = tl.load(score_ptr + unit, mask=units, other=0.0)
    tl.store(dz_query_ptr + b * 5 * size + unit, _sum(d_pre, 0) * score, mask=units)
    d_key = 2.0 * d_pre * score[None, :]
    d_entry = weights[:, None] * ds[None, :]
    _accumulate(d_keys_ptr + memory_rows, d_key, is_in)
    _accumulate(d_chunk_keys_ptr + chunk_rows, d_key, is_chunk)
    _accumulate(d_memory_ptr + memory_rows, d_entry, is_in)
    _accumulate(d_chunk_ptr + chunk_rows, d_entry, is_chunk)


@triton.jit
def _accumulate(pointers, value, mask):
    tl.store(pointers, tl.load(pointers, mask=mask, other=0.0) + value, mask=mask)


@triton.jit
def _lstm_backward(ds_ptr, d_h_ptr, d_key_h_ptr, act_ptr, partner_ptr,
                   reset_ptr, dc_ptr, dz_ptr, h_stride, numel, size, BLOCK: tl.constexpr):
    """The LSTM base of one step back (``BaseRecurrence.backward``): from ``dh = ds + d h_k +
    (d U_a h_k) U_a`` and ``dc`` (that of c_k), the gradient of the base's pre-activations
    into ``dz`` and that of c_{k-1} into ``dc``, zero where the env resets at step k."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    row = offsets // size
    col = offsets % size
    dh = (tl.load(ds_ptr + offsets, mask=mask, other=0.0)
          + tl.load(d_h_ptr + row * h_stride + col, mask=mask, other=0.0)
          + tl.load(d_key_h_ptr + offsets, mask=mask, other=0.0))
    act = act_ptr + row * 4 * size + col
    i = tl.load(act, mask=mask, other=0.0)
    f = tl.load(act + size, mask=mask, other=0.0)
    g_sigmoid = tl.load(act + 2 * size, mask=mask, other=0.0)
    o = tl.load(act + 3 * size, mask=mask, other=0.0)
    partner = partner_ptr + row * 4 * size + col
    g = tl.load(partner, mask=mask, other=0.0)
    c_prev = tl.load(partner + size, mask=mask, other=0.0)
    tanh_c = tl.load(partner + 3 * size, mask=mask, other=0.0)
    dc = dh * o * (1.0 - tanh_c * tanh_c) + tl.load(dc_ptr + offsets, mask=mask, other=0.0)
    dz = dz_ptr + row * 5 * size + col
    tl.store(dz, g * dc * i * (1.0 - i), mask=mask)
    tl.store(dz + size, c_prev * dc * f * (1.0 - f), mask=mask)
    tl.store(dz + 2 * size, 2.0 * i * dc * g_sigmoid * (1.0 - g_sigmoid), mask=mask)
    tl.store(dz + 3 * size, tanh_c * dh * o * (1.0 - o), mask=mask)
    reset = tl.load(reset_ptr + row, mask=mask, other=0.0)
    tl.store(dc_ptr + offsets, tl.where(reset > 0.0, 0.0, dc * f), mask=mask)


def _step_blocks(window: Window) -> dict[str, int]:
    """The attention kernels' blocks for a chunk, and warps enough that a thread holds some 32
    values of each ``BLOCK_W × BLOCK_H`` tile (the tiles live in registers)."""
    widest = max(incoming + end - first for incoming, first, end in window.windows)
    block_w, block_h = blocks(widest, window.chunk.shape[2])
    warps = min(16, max(4, triton.next_power_of_2(block_w * block_h // (32 * 32))))
    return {"BLOCK_W": block_w, "BLOCK_H": block_h, "num_warps": warps}


def forward_loop(z_in: Tensor, recurrent: Tensor, key: Tensor, score: Tensor, s0: Tensor,
                 resets: Tensor, mask: Tensor, window: Window, act: Tensor, partner: Tensor,
                 weights_full: Tensor, y: Tensor) -> KernelTape:
    """The forward loop over a chunk into the engine's buffers: ``y``, ``act``, ``partner``
    (its row 0's ``c_{-1}`` set), the window's chunk and chunk keys and ``weights_full``
    (zeroed).

    Shapes:
        - z_in: ``(T, B, 5H)``, ``[x_p, 2b_a]`` of every step, a buffer the loop completes
          into ``z``; recurrent: ``(5H, H)``;
          key: ``(H, H)``, :math:`U_a`; score: ``(H,)``, :math:`2v_a`; s0: ``(B, H)``
        - resets: ``(T, B)`` bool; mask: ``(T, B, n_in + T)``; weights_full likewise
        - y: ``(T, B, H)``
    """
    steps, batch, hidden = y.shape
    n_in, capacity = window.windows[0][0], window.memory.shape[1]
    flags = resets.to(y.dtype)
    keep_next = torch.ones_like(flags)
    keep_next[:-1] -= flags[1:]
    keep_next[-1] = 0.0
    z = z_in  # each step adds s W^T in place: one launch (addmm into another tensor is two)
    s = s0.masked_fill(resets[0, :, None], 0.0)
    recurrent_t, key_t, chunk, chunk_keys = recurrent.t(), key.t(), window.chunk, window.chunk_keys
    grid, sizes = (triton.cdiv(batch * hidden, ELEMENTWISE),), _step_blocks(window)
    for k, (incoming, first, end) in enumerate(window.windows):
        z[k].addmm_(s, recurrent_t)
        _lstm_forward[grid](z[k], partner[k, :, 1], flags[k], act[k], partner[k],
                            partner[k + 1, :, 1], chunk[:, k], steps * hidden, batch * hidden,
                            hidden, BLOCK=ELEMENTWISE)
        torch.mm(chunk[:, k], key_t, out=chunk_keys[:, k])
        _attention_forward[(batch,)](
            z[k], mask[k], score, window.memory, window.keys, chunk, chunk_keys,
            weights_full[k], y[k], s, keep_next[k], k, incoming, first, incoming + end - first,
            n_in, capacity, steps, hidden, **sizes)
    return KernelTape(window, act, partner, flags, z, weights_full, keep_next)


class Gradients(NamedTuple):
    """The backward loop's buffers it adds into (zeroed or holding the final state's part)."""

    chunk: Tensor
    """``(B, T, H)``: the chunk's states'."""
    chunk_keys: Tensor
    """``(B, T, H)``: their keys'."""
    memory: Tensor
    """``(B, capacity, H)``, contiguous: the incoming memory's."""
    keys: Tensor
    """Likewise its keys'."""
    score_rows: Tensor
    r"""``(B, 1, H)``: :math:`\sum_i \bar{\ell}_i e_i` per batch item."""
    z: Tensor
    """``(T, B, 5H)``: written, that of every step's ``z``."""


def backward_loop(tape: KernelTape, recurrent: Tensor, key: Tensor, score: Tensor,
                  g_y: Tensor | None, g_c: Tensor | None,
                  grads: Gradients) -> tuple[Tensor, Tensor]:
    """The backward loop over a chunk into ``grads``; returns the gradients of ``s0`` and
    ``c0``.

    Shapes: g_y ``(T, B, H)`` or ``None``; g_c ``(B, H)`` or ``None``; the weights as
    :func:`forward_loop`'s.
    """
    window = tape.window
    steps, batch, hidden = tape.z.shape[0], tape.z.shape[1], window.chunk.shape[2]
    n_in, capacity = window.windows[0][0], window.memory.shape[1]
    g_y = g_y.contiguous() if g_y is not None else None
    carry, ds, d_key_h = (tape.z.new_zeros(batch, hidden) for _ in range(3))
    dc = (g_c.clone(memory_format=torch.contiguous_format) if g_c is not None
          else torch.zeros_like(carry))
    grid, sizes = (triton.cdiv(batch * hidden, ELEMENTWISE),), _step_blocks(window)
    for k in reversed(range(steps)):
        incoming, first, end = window.windows[k]
        _attention_backward[(batch,)](
            tape.z[k], score, window.memory, window.keys, window.chunk, window.chunk_keys,
            tape.weights_full[k], g_y[k] if g_y is not None else ds, carry, tape.keep_next[k],
            ds, grads.z[k, :, 4 * hidden:], grads.score_rows, grads.memory, grads.keys,
            grads.chunk, grads.chunk_keys, incoming, first, incoming + end - first, n_in,
            capacity, steps, hidden, HAS_GRAD_Y=g_y is not None, **sizes)
        torch.mm(grads.chunk_keys[:, k], key, out=d_key_h)
        _lstm_backward[grid](ds, grads.chunk[:, k], d_key_h, tape.act[k], tape.partner[k],
                             tape.resets[k], dc, grads.z[k], steps * hidden, batch * hidden,
                             hidden, BLOCK=ELEMENTWISE)
        torch.mm(grads.z[k], recurrent, out=carry)
    return carry.masked_fill_(tape.resets[0, :, None] > 0, 0.0), dc


@triton.jit
def _rollout_attention(z_ptr, h_ptr, key_h_ptr, reset_ptr, t_ptr, valid_ptr, memory_ptr,
                       keys_ptr, score_ptr, y_ptr, t_out_ptr, valid_out_ptr, memory_out_ptr,
                       keys_out_ptr, attention_ptr, slot_time_ptr, slots, size,
                       BLOCK_W: tl.constexpr, BLOCK_H: tl.constexpr):
    """A rollout's step of the attention for batch item ``b``, on the state's own layout: the
    memory with h_k in slot ``t mod capacity`` (zero first where the env resets), the
    attention over its valid slots, ``s_k = h_k + Σ_j w_j m_j``, and the step's traces."""
    b = tl.program_id(0)
    slot = tl.arange(0, BLOCK_W)
    unit = tl.arange(0, BLOCK_H)
    units = unit < size
    slots_in = slot < slots
    tile = slots_in[:, None] & units[None, :]
    reset = tl.load(reset_ptr + b) != 0
    t = tl.where(reset, 0, tl.load(t_ptr + b))
    new = slot == (t % slots)
    valid = ((tl.load(valid_ptr + b * slots + slot, mask=slots_in, other=0) != 0) & ~reset
             | new) & slots_in
    rows = (b * slots + slot[:, None]) * size + unit[None, :]
    h = tl.load(h_ptr + b * size + unit, mask=units, other=0.0)
    memory = tl.where(reset, 0.0, tl.load(memory_ptr + rows, mask=tile, other=0.0))
    memory = tl.where(new[:, None], h[None, :], memory)
    key_h = tl.load(key_h_ptr + b * size + unit, mask=units, other=0.0)
    keys = tl.where(reset, 0.0, tl.load(keys_ptr + rows, mask=tile, other=0.0))
    keys = tl.where(new[:, None], key_h[None, :], keys)
    tl.store(memory_out_ptr + rows, memory, mask=tile)
    tl.store(keys_out_ptr + rows, keys, mask=tile)
    tl.store(valid_out_ptr + b * slots + slot, valid.to(tl.uint8), mask=slots_in)
    query = tl.load(z_ptr + b * 5 * size + 4 * size + unit, mask=units, other=0.0)
    e = _sigmoid(query[None, :] + 2.0 * keys)
    score = tl.load(score_ptr + unit, mask=units, other=0.0)
    logits = tl.where(valid, _sum(e * score[None, :], 1), float("-inf"))
    exp = tl.exp(logits - _max(logits, 0))
    weights = exp / _sum(exp, 0)
    tl.store(y_ptr + b * size + unit, h + _sum(weights[:, None] * memory, 0), mask=units)
    tl.store(attention_ptr + b * slots + slot, weights, mask=slots_in)
    age = ((t - slot) % slots + slots) % slots  # t - j mod capacity, in [0, capacity)
    tl.store(slot_time_ptr + b * slots + slot, tl.where(valid, t - age, -1), mask=slots_in)
    tl.store(t_out_ptr + b, t + 1)


class RolloutStep(NamedTuple):
    """What :func:`rollout_step` returns: the output and the state's fields, with the traces."""

    y: Tensor
    c: Tensor
    t: Tensor
    memory: Tensor
    keys: Tensor
    valid: Tensor
    attention: Tensor
    slot_time: Tensor


def rollout_step(xp: Tensor, recurrent: Tensor, key: Tensor, score: Tensor, query_bias: Tensor,
                 s: Tensor, c: Tensor, t: Tensor, memory: Tensor, keys: Tensor, valid: Tensor,
                 reset: Tensor) -> RolloutStep:
    """One step without autograd (a rollout's), from the state's own layout: no chunk set-up,
    no host read. The weights as :func:`forward_loop`'s.

    Shapes: xp ``(B, 4H)``; s, c ``(B, H)``; t ``(B,)`` long; memory, keys ``(B, capacity,
    H)``; valid ``(B, capacity)`` bool; reset ``(B,)`` bool; the fields returned likewise, y
    ``(B, H)``, attention and slot_time ``(B, capacity)``.
    """
    batch, hidden = s.shape
    capacity = memory.shape[1]
    flags = reset.to(s.dtype)
    z = torch.cat([xp, query_bias.expand(batch, hidden)], 1)
    z.addmm_(s.masked_fill(reset[:, None], 0.0), recurrent.t())
    act, partner = s.new_empty(batch, 4, hidden), s.new_empty(2, batch, 4, hidden)
    partner[0, :, 1] = c
    h = s.new_empty(batch, hidden)
    _lstm_forward[(triton.cdiv(batch * hidden, ELEMENTWISE),)](
        z, partner[0, :, 1], flags, act, partner[0], partner[1, :, 1], h, hidden,
        batch * hidden, hidden, BLOCK=ELEMENTWISE)
    key_h = h @ key.t()
    out = RolloutStep(s.new_empty(batch, hidden), partner[1, :, 1].contiguous(),
                      t.new_empty(batch), s.new_empty(memory.shape), s.new_empty(memory.shape),
                      torch.empty(batch, capacity, dtype=torch.uint8, device=s.device),
                      s.new_empty(batch, capacity), t.new_empty(batch, capacity))
    block_w, block_h = blocks(capacity, hidden)
    _rollout_attention[(batch,)](
        z, h, key_h, reset.contiguous().view(torch.uint8), t, valid.contiguous().view(
            torch.uint8), memory.contiguous(), keys.contiguous(), score, out.y, out.t,
        out.valid, out.memory, out.keys, out.attention, out.slot_time, capacity, hidden,
        BLOCK_W=block_w, BLOCK_H=block_h,
        num_warps=min(16, max(4, triton.next_power_of_2(block_w * block_h // (32 * 32)))))
    return out._replace(valid=out.valid.view(torch.bool))

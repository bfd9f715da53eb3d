r"""MemLSTM's engine: full attention over every past state of the episode, a chunk at a time
with a hand-written backward, and a compiled rollout step.

:meth:`~rlmem.cells.memlstm.MemLSTM.step`, run step by step under autograd, costs dozens of
small tensor ops and as many backward nodes, and copies the whole memory on every step. Here the
loop runs without autograd over preallocated buffers, each step reading only the entries it
can attend to, records what the backward needs, and :class:`_Full` runs the backward loop by
hand; parameter gradients are summed over the chunk in a few large matmuls after the loop. The
loops run compiled (``csrc/full_attention.h``) where :mod:`.compiled` can; on CUDA through the
Triton kernels of :mod:`.gpu.full_attention` (forward, backward and a rollout's step) where
:func:`.gpu.runs` says they can and the windows fit them; else in Python.

The math is the step's own, in the doubled form of :mod:`rlmem.cells.attention`; the softmax
cancels the constant :math:`\sum v_a` that the doubled score adds (see :mod:`.screened`).

GPU-safe: a chunk's shapes are fixed when the loop starts, the host reads the reset pattern
and the longest episode once per chunk before the loop, and nothing inside the loop waits for
the device.

Two engines, each a function of tensors that returns ``None`` for a chunk it does not take:
the chunk engine (:func:`full_scan`) and the rollout step (:func:`full_step`: compiled, or
the kernels' on CUDA). Which
one a chunk takes is the cell's choice (:meth:`rlmem.cells.memlstm.MemLSTM.fast_scan`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from rlmem.cells._engines import compiled, gpu
from rlmem.cells._engines.attentive_paths import TIME_LIMIT
from rlmem.cells._engines.base_recurrence import BaseRecurrence, previous_states, state_gradient
from rlmem.cells._engines.graph import needs_graph
from rlmem.cells._engines.onednn_linear import in_onednn, loop_weight_gradient
from rlmem.cells._engines.workspace import WORKSPACE, carve
from rlmem.cells.attention import Weights
from rlmem.cells.host_reads import any_reset, steps_with_resets_and_latest_start
from rlmem.cells.resets import cut_gradient, reset_where
from rlmem.cells.time_loop import episode_time, reset_state

_sigmoid_backward = torch.ops.aten.sigmoid_backward


class FullResult(NamedTuple):
    """What :func:`full_scan` returns: the outputs, the final state's fields and the traces."""

    y: Tensor
    """``(T, B, H)``: the macro-states :math:`s_t`."""
    c: Tensor
    """``(B, H)``: the LSTM base's final cell state."""
    memory: Tensor
    keys: Tensor
    t: Tensor
    valid: Tensor
    traces: dict[str, Tensor]


_FULL_DIFFERENTIABLE = ("y", "c", "memory", "keys")
_FULL_TRACES = ("attention", "slot_time")


class _FullTape(NamedTuple):
    """What :func:`_full_forward` keeps for :func:`_full_backward`."""

    base: BaseRecurrence
    weights: Weights
    y: Tensor
    s0: Tensor
    memory: Tensor  # (B, capacity, H): the incoming memory (its first n_in slots are attended)
    chunk: Tensor  # (B, T, H): h_k, the chunk's own states
    chunk_keys: Tensor  # (B, T, H): U_a h_k
    e: list[Tensor]  # per step (B, n_k, H): σ(2 W_a s + 2 U_a m_i) over the step's window
    attention: list[Tensor]  # per step (B, n_k): the weights over the step's window
    windows: list[tuple[int, int, int]]  # per step: incoming slots read, first chunk entry, end
    keep_incoming: Tensor  # (B, capacity, 1): incoming slots that reach the final state
    survivor_rows: Tensor  # (B * T,) long: each chunk entry's row in the final memory, or a dump
    resets: Tensor
    reset_steps: list[bool]
    blocks: tuple[Tensor, ...]
    native: Any  # the compiled ops if the forward ran them (the backward then does too)
    e_block: Tensor | None  # the buffers behind e and attention, for the compiled backward
    w_block: Tensor | None
    kernels: Any  # the Triton kernels' tape if they ran the forward (the backward then does)
    onednn: bool  # whether the compiled loops' products went to oneDNN (and so go back)


def full_flags(resets: Tensor, t0: Tensor, capacity: int) -> tuple[list[bool], int]:
    """Which steps reset some batch item, and how many incoming slots any item holds: one host
    read per chunk, before its loop."""
    flags, start = steps_with_resets_and_latest_start(resets, t0)
    return flags, min(start, capacity)


def _full_loop(xp: Tensor, s0: Tensor, resets: Tensor, any_reset: list[bool], base: BaseRecurrence,
               weights: Weights, memory: Tensor, keys: Tensor, chunk: Tensor,
               chunk_keys: Tensor, z_in: Tensor, z: Tensor, mask: Tensor,
               weights_full: Tensor, y: Tensor, e_block: Tensor, w_block: Tensor,
               windows: list[tuple[int, int, int]],
               save: bool) -> tuple[list[Tensor], list[Tensor]]:
    """The forward loop of :func:`_full_forward` in Python, over its buffers (the compiled
    ``full_forward`` is the same loop); returns the per-step views of ``e`` and of the
    attention weights that the backward reads."""
    steps, batch, hidden = y.shape
    gates, n_in = base.gates, windows[0][0]
    widths = [incoming + end - first for incoming, first, end in windows]
    recurrent_t, score_vector = weights.recurrent.t(), weights.score
    key_t = (weights.key * 0.5).t()
    z_base, query = z[:, :gates].view(batch, 4, hidden), z[:, gates:].unsqueeze(1)
    z_in_base = z_in[:, :gates]
    offset, e_steps, w_steps = 0, [], []
    for width in widths:
        e_steps.append(e_block[offset * hidden:(offset + width * batch) * hidden].view(
            batch, width, hidden))
        if save:
            offset += width * batch
    offset = 0
    for width in widths:  # contiguous: softmax's out= ignores strides
        w_steps.append(w_block[offset:offset + width * batch].view(batch, width))
        offset += width * batch
    memory_in, keys_in = memory[:, :n_in], keys[:, :n_in]
    xp_steps, y_rows = xp.unbind(0), y.unsqueeze(2).unbind(0)
    s = s0
    for k in range(steps):
        incoming, first, end = windows[k]
        if any_reset[k]:
            reset = resets[k].unsqueeze(1)
            s = reset_where(s, reset)
            base.reset(k, reset.squeeze(1))
        z_in_base.copy_(xp_steps[k])
        torch.addmm(z_in, s, recurrent_t, out=z)
        h = base.forward(k, z_base, chunk[:, k])
        torch.mm(h, key_t, out=chunk_keys[:, k])
        e_k = e_steps[k]
        # 2 W_a s + 2 U_a m_i: the query is doubled, the keys are U_a m
        if incoming:
            torch.add(query, keys_in, alpha=2.0, out=e_k[:, :incoming])
        torch.add(query, chunk_keys[:, first:end], alpha=2.0, out=e_k[:, incoming:])
        logits = torch.matmul(e_k.sigmoid_(), score_vector).add_(
            mask[k, :, n_in + first - incoming:n_in + end])
        weights_k = torch._softmax(logits, 1, False, out=w_steps[k])
        weights_full[k, :, n_in + first - incoming:n_in + end] = weights_k
        rows = weights_k.unsqueeze(1)
        if incoming:
            torch.baddbmm(chunk[:, k:k + 1], rows[..., :incoming], memory_in, out=y_rows[k])
            y_rows[k].baddbmm_(rows[..., incoming:], chunk[:, first:end])
        else:
            torch.baddbmm(chunk[:, k:k + 1], rows, chunk[:, first:end], out=y_rows[k])
        s = y_rows[k].squeeze(1)

    return e_steps, w_steps


def _windows(steps: int, capacity: int, n_in: int) -> list[tuple[int, int, int]]:
    """Per step, the entries it reads: ``(incoming slots read, first chunk entry, end)``.

    Entries of the chunk, as columns of the per-step attention: the first ``n_in`` incoming
    slots (slot order), then h_0..h_{T-1}. Until the chunk has written ``capacity`` states, a
    step reads the incoming slots and h_0..h_k; from then on every incoming slot has been
    overwritten and it reads its last ``capacity`` states.
    """
    windows = []
    for k in range(steps):
        first = max(0, k + 1 - capacity)
        windows.append((n_in if first == 0 else 0, first, k + 1))
    return windows


def _attention_mask(mask: Tensor, time: Tensor, t0: Tensor, resets: Tensor, valid: Tensor,
                    n_in: int, capacity: int) -> Tensor:
    """Which entries each step may attend to, written into ``mask`` ``(T, B, n_in + T)`` as a
    term added to its logits (0 or -inf): an entry is a state of the step's episode at most
    ``capacity - 1`` steps older than the step. ``time``: :func:`episode_time` ``(T, B)``."""
    steps, device = resets.shape[0], resets.device
    segment = resets.long().cumsum(dim=0)  # episodes started inside the chunk, so far
    columns_in = torch.arange(n_in, device=device)
    slot_step = t0.unsqueeze(1) - 1 - torch.remainder(t0.unsqueeze(1) - 1 - columns_in, capacity)
    incoming_ok = (valid[:, :n_in].unsqueeze(0) & (segment == 0).unsqueeze(2)
                   & (time.unsqueeze(2) - slot_step.unsqueeze(0) < capacity))
    entry = torch.arange(steps, device=device)
    age = entry.view(steps, 1, 1) - entry.view(1, 1, steps)  # step k minus entry k'
    chunk_ok = ((age >= 0) & (age < capacity)
                & (segment.unsqueeze(2) == segment.t().unsqueeze(0)))
    mask[..., :n_in] = 0.0
    mask[..., :n_in].masked_fill_(~incoming_ok, float("-inf"))
    mask[..., n_in:] = 0.0
    mask[..., n_in:].masked_fill_(~chunk_ok, float("-inf"))
    return mask


class _FinalState(NamedTuple):
    """The memory after a chunk, and where its entries came from (for the backward)."""

    memory: Tensor
    keys: Tensor
    valid: Tensor
    keep_incoming: Tensor  # (B, capacity, 1): incoming slots that reach the final state
    survivor_rows: Tensor  # (B * T,) long: each chunk entry's row in the final memory, or a dump


def _final_state(memory: Tensor, keys: Tensor, valid: Tensor, chunk: Tensor, chunk_keys: Tensor,
                 time: Tensor, resets: Tensor, n_in: int) -> _FinalState:
    """The final memory: slot j holds the episode's latest step ≡ j (mod capacity), an
    incoming state or one of the chunk's ``chunk`` ``(B, T, H)``."""
    steps, device = resets.shape[0], resets.device
    batch, capacity = memory.shape[:2]
    entry = torch.arange(steps, device=device)
    had_reset = resets.any(dim=0)
    last_reset = torch.where(resets, entry.unsqueeze(1), -1).max(dim=0).values
    in_segment = steps - last_reset.clamp(min=0)  # the chunk's steps of the last episode
    slots = torch.arange(capacity, device=device)
    final_age = torch.remainder(time[-1].unsqueeze(1) - slots, capacity)
    from_chunk = final_age < in_segment.unsqueeze(1)
    keep_incoming = (~from_chunk & ~had_reset.unsqueeze(1)).unsqueeze(2)
    survives = (entry.unsqueeze(0) >= steps - in_segment.unsqueeze(1)) & (
        entry.unsqueeze(0) > steps - 1 - capacity)
    rows_of_batch = torch.arange(batch, device=device).unsqueeze(1) * capacity
    survivor_rows = torch.where(survives, rows_of_batch + torch.remainder(time.t(), capacity),
                                batch * capacity).view(-1)
    final_valid = torch.zeros(batch * capacity + 1, dtype=torch.bool, device=device)
    final_valid[:-1] = (valid & keep_incoming.squeeze(2)).view(-1)
    final_valid.index_fill_(0, survivor_rows, True)
    return _FinalState(_final_slots(memory, keep_incoming, chunk, survivor_rows, n_in),
                       _final_slots(keys, keep_incoming, chunk_keys, survivor_rows, n_in),
                       final_valid[:-1].view(batch, capacity), keep_incoming, survivor_rows)


def _kernels_take(xp: Tensor, native: Any, widths: list[int], hidden: int) -> bool:
    """Whether the Triton kernels (:mod:`.gpu.full_attention`) compute a chunk: where the
    compiled loops do not, :func:`gpu.runs` says they can and its windows fit them."""
    return native is None and gpu.kernels(
        xp, "full_attention", lambda kernels: kernels.fits(max(widths), hidden)) is not None


def _forward_shapes(xp: Tensor, hidden: int, n_in: int, widths: list[int], save: bool,
                    kernels: bool) -> dict[str, tuple[int, ...]]:
    """The buffers of :func:`_full_forward`: the kernels keep every step's LSTM rows and need
    no ``e``, ``w`` or ``z`` (they keep their own)."""
    steps, batch, _ = xp.shape
    gates = 4 * hidden
    shapes = {"chunk": (batch, steps, hidden), "chunk_keys": (batch, steps, hidden),
              "weights_full": (steps, batch, n_in + steps), "mask": (steps, batch, n_in + steps),
              **BaseRecurrence.shapes(True, steps, batch, hidden, save or kernels)}
    if not kernels:
        shapes |= {"e": (sum(widths) * batch * hidden if save else max(widths) * batch * hidden,),
                   "w": (sum(widths) * batch,),
                   "z": (batch, gates + hidden), "z_in": (batch, gates + hidden)}
    return shapes


def _full_forward(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor, memory: Tensor,
                  keys: Tensor, valid: Tensor, t0: Tensor, resets: Tensor,
                  any_reset: list[bool], n_in: int, *,
                  save: bool) -> tuple[FullResult, _FullTape | None]:
    steps, batch, _ = xp.shape
    hidden, capacity = s0.shape[1], memory.shape[1]
    windows = _windows(steps, capacity, n_in)
    widths = [incoming + end - first for incoming, first, end in windows]
    native = compiled.ops(xp)
    onednn = native is not None and in_onednn(xp)
    kernels = _kernels_take(xp, native, widths, hidden)
    block, buffers = carve(_forward_shapes(xp, hidden, n_in, widths, save, kernels), xp.dtype,
                           xp.device)
    base = BaseRecurrence(True, steps, hidden, c0, save or kernels, buffers,
                          views=native is None and not kernels)
    chunk, chunk_keys = buffers["chunk"], buffers["chunk_keys"]
    weights_full = buffers["weights_full"].zero_()
    time = episode_time(t0, resets)  # (T, B)
    mask = _attention_mask(buffers["mask"], time, t0, resets, valid, n_in, capacity)
    y = xp.new_empty(steps, batch, hidden)
    e_steps: list[Tensor] = []
    w_steps: list[Tensor] = []
    kernel_tape = None
    if kernels:
        kernel_tape = _kernel_forward(xp, weights, s0, resets, mask, memory, keys, chunk,
                                      chunk_keys, windows, base, weights_full, y)
    else:
        z, z_in = buffers["z"], buffers["z_in"]
        z_in[:, 4 * hidden:] = weights.query_bias  # z's input terms: the step's xp, the bias
        if native is not None:
            native.full_forward(xp, s0, resets, weights.recurrent.t(),
                                (weights.key * 0.5).t(), weights.score, memory.contiguous(),
                                keys.contiguous(), chunk, chunk_keys, z_in, z, mask,
                                weights_full, y, buffers["e"], buffers["w"], buffers["act"],
                                buffers["partner"], buffers["minus_one"], n_in, save, onednn)
        else:
            e_steps, w_steps = _full_loop(xp, s0, resets, any_reset, base, weights, memory,
                                          keys, chunk, chunk_keys, z_in, z, mask, weights_full,
                                          y, buffers["e"], buffers["w"], windows, save)

    final = _final_state(memory, keys, valid, chunk, chunk_keys, time, resets, n_in)
    attention, slot_time = _slot_traces(native, weights_full, time, resets, valid, n_in,
                                        capacity)
    result = FullResult(y=y, c=base.final_c(), memory=final.memory, keys=final.keys,
                        t=time[-1] + 1, valid=final.valid,
                        traces={"attention": attention, "slot_time": slot_time})
    if not save:
        WORKSPACE.give(block)
        return result, None
    tape = _FullTape(base, weights, y, s0, memory, chunk, chunk_keys, e_steps, w_steps,
                     windows, final.keep_incoming, final.survivor_rows, resets, any_reset,
                     (block,), native, buffers.get("e"), buffers.get("w"), kernel_tape, onednn)
    return result, tape


def _kernel_forward(xp: Tensor, weights: Weights, s0: Tensor, resets: Tensor, mask: Tensor,
                    memory: Tensor, keys: Tensor, chunk: Tensor, chunk_keys: Tensor,
                    windows: list[tuple[int, int, int]], base: BaseRecurrence,
                    weights_full: Tensor, y: Tensor) -> Any:
    """The forward loop through the Triton kernels (:mod:`.gpu.full_attention`)."""
    from rlmem.cells._engines.gpu import full_attention as kernels
    steps, batch, hidden = y.shape
    z_in = torch.cat([xp, weights.query_bias.expand(steps, batch, hidden)], 2)
    window = kernels.Window(memory.contiguous(), keys.contiguous(), chunk, chunk_keys, windows)
    return kernels.forward_loop(z_in, weights.recurrent, weights.key * 0.5,
                                weights.score.contiguous(), s0, resets, mask, window, base.act,
                                base.partner, weights_full, y)


def _slot_traces(native: Any, weights_full: Tensor, time: Tensor, resets: Tensor,
                 valid: Tensor, n_in: int, capacity: int) -> tuple[Tensor, Tensor]:
    """The traces in slot order, compiled or in Python (:func:`_full_traces`).

    Each entry sits in one slot (an incoming slot in its own, h_k in slot t_k mod capacity)
    and an invalid entry has weight 0, so summing the weights into slots gives each slot its
    state's weight. At step k slot j holds the episode step t_k - ((t_k - j) mod capacity) if
    the chunk wrote it in this episode, else incoming j.
    """
    if native is None:
        return _full_traces(weights_full, time, resets, valid, n_in, capacity)
    entry = torch.arange(resets.shape[0], device=resets.device)
    episode_start = torch.where(resets, entry.unsqueeze(1), -1).cummax(dim=0).values
    attention, slot_time = native.full_traces(weights_full, time, episode_start, valid, n_in,
                                              capacity)
    return attention, slot_time


def _full_traces(weights_full: Tensor, time: Tensor, resets: Tensor, valid: Tensor,
                 n_in: int, capacity: int) -> tuple[Tensor, Tensor]:
    """MemLSTM's traces in slot order from the weights over a chunk's entries: the attention
    each slot's state received and the episode step each slot holds (the compiled
    ``full_traces`` computes the same)."""
    steps, batch, _ = weights_full.shape
    device = weights_full.device
    columns_in = torch.arange(n_in, device=device)
    entry = torch.arange(steps, device=device)
    slots = torch.arange(capacity, device=device)
    entry_slot = torch.cat([columns_in.expand(batch, n_in),
                            torch.remainder(time.t(), capacity)], dim=1)
    attention = weights_full.new_zeros(steps, batch, capacity).scatter_add_(
        2, entry_slot.expand(steps, batch, n_in + steps), weights_full)
    trace_block, trace_buffers = carve({"age": (steps, batch, capacity)}, torch.long, device)
    flag_block, flag_buffers = carve({"chunk": (steps, batch, capacity),
                                       "kept": (steps, batch, capacity)}, torch.bool, device)
    age, written, kept = trace_buffers["age"], flag_buffers["chunk"], flag_buffers["kept"]
    torch.sub(time.unsqueeze(2), slots, out=age).remainder_(capacity)
    episode_start = torch.where(resets, entry.unsqueeze(1), -1).cummax(dim=0).values
    seen = (entry.unsqueeze(1) + 1 - episode_start.clamp(min=0)).unsqueeze(2)
    torch.lt(age, seen, out=written)
    torch.logical_and((episode_start < 0).unsqueeze(2), valid.unsqueeze(0), out=kept)
    empty = written.logical_or_(kept).logical_not_()
    slot_time = torch.sub(time.unsqueeze(2), age).masked_fill_(empty, -1)
    WORKSPACE.give(trace_block, flag_block)
    return attention, slot_time


def _final_slots(incoming: Tensor, keep: Tensor, chunk: Tensor, rows: Tensor,
                 n_in: int) -> Tensor:
    """The incoming slots that are kept, overwritten by the chunk's surviving entries. Every
    incoming slot from ``n_in`` on is empty, hence zero: only the first ``n_in`` are read.

    Shapes: incoming ``(B, capacity, H)``; keep ``(B, capacity, 1)`` bool; chunk ``(B, T, H)``;
    rows ``(B * T,)``, each entry's flat row, ``B * capacity`` (a dump row) if it is gone.
    """
    batch, capacity, hidden = incoming.shape
    out = incoming.new_empty(batch * capacity + 1, hidden)
    slots = out[:-1].view(batch, capacity, hidden)
    torch.where(keep[:, :n_in], incoming[:, :n_in], incoming.new_zeros(()),
                out=slots[:, :n_in])
    slots[:, n_in:].zero_()
    out.index_copy_(0, rows, chunk.reshape(-1, hidden))
    return slots


def _full_backward_loop(tape: _FullTape, g_y: Tensor | None, g_c: Tensor | None,
                        d_chunk: Tensor, d_chunk_keys: Tensor, d_memory: Tensor,
                        d_keys: Tensor, d_score_rows: Tensor,
                        buffers: dict[str, Tensor]) -> tuple[Tensor, Tensor | None]:
    """The backward loop of :func:`_full_backward` in Python, over its buffers (the compiled
    ``full_backward`` is the same loop); returns the gradients of ``s0`` and ``c0``."""
    base, y, chunk = tape.base, tape.y, tape.chunk
    steps, batch, hidden = y.shape
    n_in, gates = tape.windows[0][0], base.gates
    recurrent, score_vector = tape.weights.recurrent, tape.weights.score
    key = tape.weights.key * 0.5
    d_act = buffers["d_act"]
    d_act_parts = (d_act[:, :3], d_act[:, 3])
    dc_buffers = buffers["dc"].unbind(0)

    dz = buffers["dz"]
    dz_steps = dz.unbind(0)
    dz_base = dz[:, :, :gates].view(steps, batch, 4, hidden).unbind(0)
    dz_query = dz[:, :, gates:].unbind(0)
    memory_columns = tape.memory[:, :n_in].transpose(1, 2)
    g_y_steps = g_y.unbind(0) if g_y is not None else None
    softmax_backward = torch.ops.aten._softmax_backward_data.out
    ds = g_y_steps[-1] if g_y_steps is not None else y.new_zeros(batch, hidden)
    dc = g_c
    for k in reversed(range(steps)):
        incoming, first, end = tape.windows[k]
        width = incoming + end - first
        weights_k, e_k, ds_row = tape.attention[k], tape.e[k], ds.unsqueeze(1)
        chunk_columns = chunk[:, first:end].transpose(1, 2)
        if incoming:
            d_weights = torch.cat([torch.bmm(ds_row, memory_columns),
                                   torch.bmm(ds_row, chunk_columns)], dim=2)
        else:
            d_weights = torch.bmm(ds_row, chunk_columns)
        d_logits = softmax_backward(d_weights.view(batch, width), weights_k, 1, y.dtype,
                                    grad_input=buffers["d_logits"][:batch * width].view(
                                        batch, width))
        d_score_rows.baddbmm_(d_logits.unsqueeze(1), e_k)
        d_pre = buffers["d_pre"][:batch * width * hidden].view(batch, width, hidden)
        # d(2 W_a s + 2 U_a m_i) = dlogit_i σ'(.) ⊙ 2 v_a: d_pre holds dlogit_i σ'(.), and
        # each use multiplies by 2 v_a (one pass fewer over the slots)
        _sigmoid_backward.grad_input(d_logits.unsqueeze(2), e_k, grad_input=d_pre)
        torch.sum(d_pre, dim=1, out=dz_query[k]).mul_(score_vector)
        weights_columns = weights_k.unsqueeze(2)
        if incoming:
            d_keys[:, :n_in].addcmul_(d_pre[:, :incoming], score_vector, value=2.0)
            d_memory[:, :n_in].addcmul_(weights_columns[:, :incoming], ds_row)
        d_chunk_keys[:, first:end].addcmul_(d_pre[:, incoming:], score_vector, value=2.0)
        d_chunk[:, first:end].addcmul_(weights_columns[:, incoming:], ds_row)
        # Every read of h_k happens at steps ≥ k, so its gradient is complete here.
        dh = torch.addmm(ds + d_chunk[:, k], d_chunk_keys[:, k], key)
        dc = base.backward(k, chunk[:, k], dh, dc, dz_base[k], d_act, d_act_parts,
                           dc_buffers[k % 2])
        g_previous = g_y_steps[k - 1] if g_y_steps is not None and k > 0 else None
        reset = tape.resets[k].unsqueeze(1) if tape.reset_steps[k] else None
        ds = state_gradient(dz_steps[k], recurrent, g_previous, reset)
        if dc is not None and reset is not None:
            dc = cut_gradient(dc, reset)

    return ds, dc


def _full_backward(tape: _FullTape, g_y: Tensor | None, g_c: Tensor | None,
                   g_memory: Tensor | None, g_keys: Tensor | None, incoming_needed: bool
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None,
                              Tensor | None, Tensor | None]:
    """Gradients of ``xp``, the four weights, ``s0``, ``c0``, ``memory`` and ``keys``; those
    of ``memory`` and ``keys`` ``None`` unless ``incoming_needed`` (a truncated rollout chunk
    starts from a detached state)."""
    base, weights, y, chunk = tape.base, tape.weights, tape.y, tape.chunk
    steps, batch, hidden = y.shape
    n_in = tape.windows[0][0]
    gates = base.gates
    recurrent, score_vector = weights.recurrent, weights.score
    key = weights.key * 0.5
    widest = max(incoming + end - first for incoming, first, end in tape.windows)
    block, buffers = carve({
        "d_chunk": (batch, steps, hidden), "d_chunk_keys": (batch, steps, hidden),
        "d_logits": (batch * widest,), "d_pre": (batch * widest * hidden,),
        "d_act": (batch, 4, hidden), "dc": (2, batch, 1, hidden),
        "dz": (steps, batch, recurrent.shape[0]), "s_prev": (steps, batch, hidden)},
        y.dtype, y.device)
    d_chunk, d_chunk_keys = buffers["d_chunk"].zero_(), buffers["d_chunk_keys"].zero_()
    keep = tape.keep_incoming
    # The final state's gradient: kept incoming slots pass it to the incoming state, the
    # surviving entries of the chunk to their states.
    d_memory, d_keys = (_incoming_gradient(grad, keep, tape.memory, n_in, incoming_needed)
                        for grad in (g_memory, g_keys))
    for grad, into in ((g_memory, d_chunk), (g_keys, d_chunk_keys)):
        if grad is not None:
            rows = torch.cat([grad.reshape(-1, hidden), grad.new_zeros(1, hidden)])
            torch.index_select(rows, 0, tape.survivor_rows, out=into.view(-1, hidden))
    dz = buffers["dz"]
    d_score_rows = y.new_zeros(batch, 1, hidden)  # Σ dlogit_i e_i per batch item
    dc: Tensor | None
    if tape.kernels is not None:
        ds, dc = _kernel_backward(tape, g_y, g_c, d_chunk, d_chunk_keys, d_memory, d_keys,
                                  d_score_rows, dz)
    elif tape.native is not None:
        empty = y.new_empty(0)
        ds, dc = tape.native.full_backward(
            g_y if g_y is not None else empty, g_c if g_c is not None else empty, tape.resets,
            recurrent, key, score_vector, tape.memory.contiguous(), chunk, tape.e_block,
            tape.w_block, n_in, d_chunk, d_chunk_keys, d_memory, d_keys, d_score_rows, dz,
            buffers["d_logits"], buffers["dc"], base.act, base.partner, tape.onednn)
        dc = dc if dc.numel() else None
    else:
        ds, dc = _full_backward_loop(tape, g_y, g_c, d_chunk, d_chunk_keys, d_memory, d_keys,
                                     d_score_rows, buffers)

    s_prev = previous_states(buffers["s_prev"], tape.s0, y, tape.resets)
    d_recurrent = loop_weight_gradient(s_prev.view(-1, hidden), dz.view(-1, dz.shape[2]),
                                       tape.onednn)
    # The chunk's keys are U_a h = (2 U_a / 2) h; incoming keys do not depend on U_a.
    d_key = loop_weight_gradient(chunk.view(-1, hidden), d_chunk_keys.view(-1, hidden),
                                 tape.onednn).mul_(0.5)
    d_xp, d_query_bias = dz[:, :, :gates].contiguous(), dz[:, :, gates:].sum(dim=(0, 1))
    dc = dc.clone() if dc is not None else None  # not a view of the block given back below
    WORKSPACE.give(block, *tape.blocks)
    return (d_xp, d_recurrent, d_key, d_score_rows.sum(dim=(0, 1)), d_query_bias, ds, dc,
            d_memory if incoming_needed else None, d_keys if incoming_needed else None)


def _kernel_backward(tape: _FullTape, g_y: Tensor | None, g_c: Tensor | None,
                     d_chunk: Tensor, d_chunk_keys: Tensor, d_memory: Tensor, d_keys: Tensor,
                     d_score_rows: Tensor, dz: Tensor) -> tuple[Tensor, Tensor]:
    """The backward loop through the Triton kernels (:mod:`.gpu.full_attention`), adding into
    the buffers :func:`_full_backward_loop` adds into; returns the gradients of ``s0``, ``c0``."""
    from rlmem.cells._engines.gpu import full_attention as kernels
    memory, keys = (grad.contiguous() for grad in (d_memory, d_keys))  # the kernels' layout
    grads = kernels.Gradients(d_chunk, d_chunk_keys, memory, keys, d_score_rows, dz)
    weights = tape.weights
    ds, dc = kernels.backward_loop(tape.kernels, weights.recurrent, weights.key * 0.5,
                                   weights.score.contiguous(), g_y, g_c, grads)
    for grad, written in ((d_memory, memory), (d_keys, keys)):
        if written is not grad:
            grad.copy_(written)
    return ds, dc


def _incoming_gradient(grad: Tensor | None, keep: Tensor, incoming: Tensor, n_in: int,
                       needed: bool) -> Tensor:
    """Where the backward sums the gradient of the incoming ``memory`` or ``keys``: the final
    state's gradient on the kept slots, zeros elsewhere. The loop adds only to the first
    ``n_in`` slots (what the chunk reads), so when the incoming state needs no gradient and the
    final one brings none, only those are zeroed.

    Shapes: grad and incoming ``(B, capacity, H)``, grad may be ``None``; keep
    ``(B, capacity, 1)`` bool; returns ``(B, capacity, H)``.
    """
    if grad is not None:
        return torch.where(keep, grad, grad.new_zeros(()))
    if needed:
        return torch.zeros_like(incoming)
    out = torch.empty_like(incoming)
    out[:, :n_in].zero_()
    return out


class _Full(torch.autograd.Function):
    """:func:`_full_forward` and :func:`_full_backward` as one autograd node per chunk."""

    @staticmethod
    def forward(ctx: FunctionCtx, any_reset: list[bool], n_in: int, resets: Tensor, t0: Tensor,
                valid: Tensor, xp: Tensor, recurrent: Tensor, key: Tensor, score: Tensor,
                query_bias: Tensor, s0: Tensor, c0: Tensor, memory: Tensor,
                keys: Tensor) -> tuple[Any, ...]:
        result, tape = _full_forward(xp, Weights(recurrent, key, score, query_bias), s0, c0,
                                     memory, keys,
                                     valid, t0, resets, any_reset, n_in, save=True)
        ctx.tape = tape  # type: ignore[attr-defined]
        ctx.set_materialize_grads(False)
        outputs = (result.y, result.c, result.memory, result.keys, result.t, result.valid,
                   *(result.traces[key] for key in _FULL_TRACES))
        ctx.mark_non_differentiable(*outputs[len(_FULL_DIFFERENTIABLE):])
        return outputs

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, *grads: Tensor | None) -> tuple[Tensor | None, ...]:
        tape: _FullTape | None = ctx.tape  # type: ignore[attr-defined]
        if tape is None:
            raise RuntimeError("an attentive cell's chunk can be backpropagated once: its "
                               "backward reuses the forward's buffers (no retain_graph)")
        ctx.tape = None  # type: ignore[attr-defined]
        needs = ctx.needs_input_grad  # type: ignore[attr-defined]
        g_y, g_c, g_memory, g_keys = grads[:len(_FULL_DIFFERENTIABLE)]
        return (None, None, None, None, None,
                *_full_backward(tape, g_y, g_c, g_memory, g_keys,
                                incoming_needed=needs[_INCOMING[0]] or needs[_INCOMING[1]]))


_INCOMING = (12, 13)
"""Positions of ``memory`` and ``keys`` among :meth:`_Full.forward`'s inputs (``ctx`` not
counted)."""


def full_scan(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor, memory: Tensor,
              keys: Tensor, valid: Tensor, t0: Tensor, resets: Tensor) -> FullResult | None:
    """Full attention over every past state of the episode (MemLSTM) over one chunk.

    Equivalent to running the cell's step under :func:`rlmem.cells.time_loop.scan`; see
    :class:`rlmem.cells.memlstm.MemLSTM` for the equations. Step k reads only the entries it
    can attend to: the incoming slots the longest episode fills and the chunk's states so far,
    so its work grows with the episode, not with the capacity. Returns ``None`` for a dtype
    other than float32 and float64, for the caller to run the step instead.

    After a reset, the chunk's states of the finished episode are masked out rather than
    zeroed: their weight is exactly 0, so they contribute nothing as long as they are finite
    (the per-step definition zeroes the memory, which also stops a non-finite state).

    Shapes:
        - xp: ``(T, B, 4H)``, the LSTM gates' input terms; s0, c0: ``(B, H)``
        - memory, keys: ``(B, capacity, H)``, slot ``j`` holding the step ``≡ j (mod
          capacity)``; valid ``(B, capacity)`` bool; t0 ``(B,)`` long; resets ``(T, B)`` bool
    """
    if xp.dtype not in TIME_LIMIT:
        return None
    any_reset, n_in = full_flags(resets, t0, memory.shape[1])
    tensors = (xp, *weights, s0, c0, memory, keys)
    if not needs_graph(tensors):
        return _full_forward(xp, weights, s0, c0, memory, keys, valid, t0, resets, any_reset,
                             n_in, save=False)[0]
    y, c, memory, keys, t, valid, *traces = _Full.apply(
        any_reset, n_in, resets, t0, valid, xp, *weights, s0, c0, memory, keys)
    return FullResult(y=y, c=c, memory=memory, keys=keys, t=t, valid=valid,
                      traces=dict(zip(_FULL_TRACES, traces, strict=True)))


class _StepFields(NamedTuple):
    """MemLSTM's state fields but the memory and its keys, for
    :func:`rlmem.cells.time_loop.reset_state`: the compiled step empties those itself."""

    s: Tensor
    c: Tensor
    t: Tensor
    valid: Tensor


def full_step(xp: Tensor, weights: Weights, s: Tensor, c: Tensor, t: Tensor, memory: Tensor,
              keys: Tensor, valid: Tensor, resets: Tensor, used: int) -> FullResult | None:
    """MemLSTM's step for one rollout step without autograd, compiled (``csrc/full_step.h``):
    :meth:`rlmem.cells.memlstm.MemLSTM.step` (in the doubled form) attending over the slots
    ``[0, used)``, which must hold every state of every batch item. ``None`` where it does not
    apply (more than one step, autograd, another dtype, no compiled loops), for the caller to
    run the step in Python. Where the Triton kernels run (:func:`gpu.runs`: on CUDA), they
    compute the step instead (:func:`_kernel_step`), over every slot.

    Shapes: as :func:`full_scan`, with ``T = 1``.
    """
    native = compiled.ops(xp)
    tensors = (xp, *weights, s, c, memory, keys)
    if (xp.shape[0] != 1 or xp.dtype not in TIME_LIMIT
            or needs_graph(tensors)):
        return None
    if native is None:  # on CUDA, the Triton kernels' step
        return _kernel_step(xp, weights, s, c, t, memory, keys, valid, resets)
    if any_reset(resets):  # on the CPU, reading the flag costs no sync
        # the memory and keys of an item that resets are emptied as the step copies the rest:
        # a masked copy of both here cost more than the step (PPO's 256 envs reset at almost
        # every step)
        s, c, t, valid = reset_state(_StepFields(s, c, t, valid), resets[0])
    # The new memory and keys: recycled, fresh blocks of that size cost as much in page
    # faults as the step itself.
    memory_out, keys_out = (WORKSPACE.take_unshared(memory.shape, memory.dtype, memory.device,
                                                    native.storage_use_count, rows=used)
                            for _ in range(2))
    y, c, t, valid, attention, slot_time = native.full_step(
        xp[0], s, c, t, memory, keys, valid, resets[0], weights.recurrent, weights.key,
        weights.score, weights.query_bias, used, memory_out, keys_out)
    memory, keys = memory_out, keys_out
    return FullResult(y=y.unsqueeze(0), c=c, memory=memory, keys=keys, t=t, valid=valid,
                      traces={"attention": attention.unsqueeze(0),
                              "slot_time": slot_time.unsqueeze(0)})



def _kernel_step(xp: Tensor, weights: Weights, s: Tensor, c: Tensor, t: Tensor, memory: Tensor,
                 keys: Tensor, valid: Tensor, resets: Tensor) -> FullResult | None:
    """:func:`full_step` through the Triton kernels (``gpu.full_attention.rollout_step``), on
    the state's own layout; ``None`` where they do not run or the memory is too wide for
    them."""
    kernels = gpu.kernels(xp, "full_attention",
                          lambda kernels: kernels.fits(memory.shape[1], s.shape[1]))
    if kernels is None:
        return None
    step = kernels.rollout_step(xp[0], weights.recurrent, weights.key * 0.5,
                                weights.score.contiguous(), weights.query_bias, s, c, t, memory,
                                keys, valid, resets[0])
    return FullResult(y=step.y.unsqueeze(0), c=step.c, memory=step.memory, keys=step.keys,
                      t=step.t, valid=step.valid,
                      traces={"attention": step.attention.unsqueeze(0),
                              "slot_time": step.slot_time.unsqueeze(0)})

r"""Relevancy screening's engine (ReLSTM, ReLRNN): a chunk at a time with a hand-written
backward, and a compiled rollout step.

The cells' step (Algorithm 1, :class:`~rlmem.cells.screening.RelevancyScreening`) costs, run
step by step under autograd, dozens of small tensor ops and as many backward nodes. Here the
loop runs without autograd over preallocated buffers, records what the backward needs, and
:class:`_Screened` runs the backward loop by hand; parameter gradients are summed over the
chunk in a few large matmuls after the loop. The loops run compiled (``csrc/screened.h``)
where :mod:`.compiled` can (the CPU), else through Triton kernels where :func:`.gpu.runs`
(CUDA; :mod:`.gpu.screened`: a fused kernel per step forward and backward, and a rollout's
step in one kernel), else in Python.

The math is the step's (written there in textbook form), in the doubled form of
:mod:`rlmem.cells.attention` (:math:`\tanh(x) = 2\sigma(2x) - 1`, the factors 2 folded into
the weights). One more identity changes only rounding: the attention score
:math:`v_a^\top \tanh(\cdot) = 2 v_a^\top \sigma(2\,\cdot) - \sum v_a` differs from
:math:`2 v_a^\top \sigma(2\,\cdot)` by a constant over the slots, which the softmax cancels.

GPU-safe: a chunk's shapes are fixed when the loop starts, the host reads the reset pattern
once per chunk before the loop, and nothing inside the loop waits for the device.

Two engines, each a function of tensors that returns ``None`` for a chunk it does not take:
the chunk engine (:func:`screened_scan`) and the compiled rollout step (:func:`screened_step`).
Which one a chunk takes is the cell's choice
(:meth:`rlmem.cells.screening.RelevancyScreening.fast_scan`).
"""

from __future__ import annotations

from types import ModuleType
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


class ScreenedResult(NamedTuple):
    """What :func:`screened_scan` returns: the outputs, the final memory in the state's layout,
    and the per-step traces, each as the per-step definition produces them."""

    y: Tensor
    """``(T, B, H)``: the macro-states :math:`s_t`."""
    c: Tensor | None
    """``(B, H)``: the LSTM base's final cell state (``None`` for the tanh-RNN)."""
    t: Tensor
    short: Tensor
    short_score: Tensor
    short_valid: Tensor
    short_time: Tensor
    relevant: Tensor
    relevant_score: Tensor
    relevant_valid: Tensor
    relevant_time: Tensor
    traces: dict[str, Tensor]


_DIFFERENTIABLE = ("y", "c", "short", "short_score", "relevant", "relevant_score")
"""The outputs of :class:`ScreenedResult` that carry a gradient."""


class _ScreenedTape(NamedTuple):
    """What :func:`_screened_forward` keeps for :func:`_screened_backward`."""

    nu: int
    base: BaseRecurrence
    weights: Weights
    y: Tensor
    s0: Tensor
    attention: Tensor  # (T, B, ν+ρ): the weights, S in ring order
    slot_data: Tensor  # the forward's slots as they are after the last step
    e: Tensor  # (T, B, ν+ρ, H): σ(2 W_a s + 2 U_a m_i)
    targets: Tensor  # (T, B) long: the row (of the flattened slots) each candidate went to
    evicted: Tensor  # (T, B, width): what each candidate's target row held before
    before_reset: dict[int, Tensor]  # the slots before a reset emptied some of them
    incoming: Tensor  # (B, ν+ρ, H): S and R as they came in
    resets: Tensor
    reset_steps: list[bool]
    blocks: tuple[Tensor, ...]  # the WORKSPACE blocks the buffers above are carved from
    kernels: bool  # whether the Triton kernels ran the forward (and so run the backward)
    onednn: bool  # whether the compiled loops' products went to oneDNN (and so go back)


_PAD = 16
"""Columns after ``[m, 2 U_a m]`` in a slot's row: score, mask (0, or -inf when the slot is
empty), rank (score + mask), episode step, then padding that keeps rows 64-byte aligned."""

def chunk_flags(resets: Tensor, t0: Tensor, dtype: torch.dtype) -> tuple[list[bool], bool]:
    """Which steps reset some batch item, and whether the episode steps fit ``dtype`` exactly:
    one host read per chunk, before its loop."""
    flags, start = steps_with_resets_and_latest_start(resets, t0)
    return flags, start + resets.shape[0] < TIME_LIMIT[dtype]


def _empty_memory(slot_data: Tensor, nu: int, reset: Tensor,
                  uniform_share: float | None) -> None:
    """A new episode's memory for the batch items that reset (``reset`` ``(B, 1, 1)``), in
    place: every slot emptied, its mask and rank at -inf (a free slot of R ranks at the uniform
    share under normalised screening)."""
    wide = slot_data.shape[2] - _PAD
    reset_where(slot_data, reset, in_place=True)
    for column in (1, 2):  # the mask, the rank
        reset_where(slot_data[..., wide + column], reset[:, 0], float("-inf"), in_place=True)
    if uniform_share is not None:
        reset_where(slot_data[:, nu:-1, wide + 2], reset[:, 0], uniform_share, in_place=True)


def _screen_oldest(rows_of_slots: Tensor, rank_relevant: Tensor, rank_p: Tensor,
                   rows_p: Tensor, relevant_rows: Tensor, scratch_rows: Tensor, target: Tensor,
                   candidate: Tensor, evicted: Tensor | None) -> None:
    """One step's screening, in place: h_{t-ν} leaves S from its rows ``rows_p`` and is
    screened into R (see :func:`rlmem.cells.screening.screen`). A free slot of R ranks -inf,
    so the first free slot, else the first lowest score, is the target; an empty candidate
    (-inf) never enters, and goes to the scratch slot. ``target`` receives each item's target
    row, ``evicted`` (when the backward will undo the write) what that row held before."""
    lowest, slot = rank_relevant.min(dim=1)
    torch.where(rank_p > lowest, slot.add_(relevant_rows), scratch_rows, out=target)
    if evicted is not None:
        torch.index_select(rows_of_slots, 0, target, out=evicted)
    rows_of_slots.index_copy_(0, target, torch.index_select(rows_of_slots, 0, rows_p,
                                                            out=candidate))


def _add_received(score_rank_short: Tensor, attention_short: Tensor, mask_all: Tensor, nu: int,
                  uniform_share: float | None) -> None:
    """Add to the score (and alike the rank) of each state of S the attention it received at
    this step ``attention_short`` ``(B, ν, 1)``; under normalised screening relative to the
    uniform share 1/|M_t|, averaged over the ν steps."""
    if uniform_share is None:
        score_rank_short.add_(attention_short)
        return
    share = (mask_all == 0).sum(dim=1, keepdim=True).to(attention_short.dtype).div_(nu)
    score_rank_short.add_(attention_short * share.unsqueeze(2))


def _screened_loop(xp: Tensor, s0: Tensor, resets: Tensor, any_reset: list[bool],
                   base: BaseRecurrence, weights: Weights, slot_data: Tensor, z_in: Tensor,
                   z: Tensor, entering: Tensor, e: Tensor, attention: Tensor, history: Tensor,
                   targets: Tensor, evicted: Tensor | None, candidate: Tensor, y: Tensor,
                   nu: int, uniform_share: float | None, save: bool) -> dict[int, Tensor]:
    """The forward loop of :func:`_screened_forward` in Python, over its buffers (the compiled
    ``screened_forward`` is the same loop). Returns the slots as they were before each step
    that resets some item, when saving."""
    steps, batch, hidden = y.shape
    slots, gates, wide = attention.shape[2], base.gates, 2 * hidden
    recurrent_t, key_t, score_vector = weights.recurrent.t(), weights.key.t(), weights.score
    rows_of_slots = slot_data.view(-1, slot_data.shape[2])
    content, keys = slot_data[..., :hidden], slot_data[..., hidden:wide]
    mask, rank = slot_data[..., wide + 1], slot_data[..., wide + 2]
    before_reset: dict[int, Tensor] = {}
    z_base = z[:, :gates].view(batch, 4, hidden) if base.lstm else z[:, :gates]
    z_query, z_in_base = z[:, gates:].unsqueeze(1), z_in[:, :gates]
    # Views made once, as lists: indexing costs as much as a small op.
    content_all, keys_all, mask_all = content[:, :slots], keys[:, :slots], mask[:, :slots]
    score_rank_short = slot_data[:, :nu, wide:wide + 3:2]  # score and rank accumulate alike
    rank_relevant, meta_all = rank[:, nu:slots], slot_data[:, :slots, wide:wide + 4]
    first_row = torch.arange(batch, device=xp.device) * (slots + 1)
    relevant_rows, scratch_rows = first_row + nu, first_row + slots  # the scratch slot
    ring = [(first_row + p, slot_data[:, p, wide:wide + 4], rank[:, p], content[:, p],
             slot_data[:, p:p + 1, :hidden], keys[:, p]) for p in range(min(nu, steps))]
    xp_steps, y_steps, e_steps = xp.unbind(0), y.unbind(0), e.unbind(0)
    y_rows, entering_steps = y.unsqueeze(2).unbind(0), entering.unbind(0)
    target_steps, history_steps = targets.unbind(0), history.unbind(0)
    attention_steps, attention_rows = attention.unbind(0), attention.unsqueeze(2).unbind(0)
    attention_short = attention[:, :, :nu].unsqueeze(3).unbind(0)
    evicted_steps = evicted.unbind(0) if evicted is not None else None
    s = s0
    for k in range(steps):
        rows_p, meta_p, rank_p, content_p, content_row_p, keys_p = ring[k % nu]
        if any_reset[k]:
            reset = resets[k].view(batch, 1, 1)
            s = reset_where(s, reset[:, 0])
            base.reset(k, reset[:, 0, 0])
            if save:
                before_reset[k] = slot_data.clone()
            _empty_memory(slot_data, nu, reset, uniform_share)
        z_in_base.copy_(xp_steps[k])
        torch.addmm(z_in, s, recurrent_t, out=z)
        _screen_oldest(rows_of_slots, rank_relevant, rank_p, rows_p, relevant_rows,
                       scratch_rows, target_steps[k], candidate,
                       evicted_steps[k] if evicted_steps is not None else None)
        # h_t enters S in the slot just vacated.
        h = base.forward(k, z_base, content_p)
        torch.mm(h, key_t, out=keys_p)
        meta_p.copy_(entering_steps[k])

        e_k = torch.add(keys_all, z_query, out=e_steps[k if save else 0]).sigmoid_()
        torch._softmax(torch.matmul(e_k, score_vector).add_(mask_all), 1, False,
                       out=attention_steps[k])
        torch.baddbmm(content_row_p, attention_rows[k], content_all, out=y_rows[k])
        s = y_steps[k]
        _add_received(score_rank_short, attention_short[k], mask_all, nu, uniform_share)
        history_steps[k].copy_(meta_all)

    return before_reset


def _fill_slots(slot_data: Tensor, key_t: Tensor, short: Tensor, short_score: Tensor,
                short_valid: Tensor, short_time: Tensor, relevant: Tensor,
                relevant_score: Tensor, relevant_valid: Tensor, relevant_time: Tensor,
                uniform_share: float | None) -> Tensor:
    """Write the incoming memory into ``slot_data`` ``(B, ν+ρ+1, 2H + _PAD)``, slot by slot.

    S as a ring buffer (at step k its oldest state sits in slot k mod ν, where h_k then goes),
    then R, then a scratch slot that takes the write of a candidate that does not enter R, so
    that no step branches per batch item. A slot's row is [m_i, 2 U_a m_i, score, mask, rank,
    episode step, padding], so that a screening write moves all of it at once. The mask is 0
    on a slot that holds a state and -inf on an empty one; the softmax adds it to the logits,
    and the screening compares ranks.
    """
    hidden, nu = short.shape[2], short.shape[1]
    slots, wide, minus_inf = nu + relevant.shape[1], 2 * hidden, float("-inf")
    slot_data.zero_()
    content, keys = slot_data[..., :hidden], slot_data[..., hidden:wide]
    score, mask, rank, slot_time = (slot_data[..., wide + column] for column in range(4))
    content[:, :nu] = short
    content[:, nu:slots] = relevant
    torch.matmul(content[:, :slots], key_t, out=keys[:, :slots])
    score[:, :nu] = short_score
    score[:, nu:slots] = relevant_score
    mask[:, :nu].masked_fill_(~short_valid, minus_inf)
    mask[:, nu:slots].masked_fill_(~relevant_valid, minus_inf)
    mask[:, slots] = minus_inf  # the scratch slot
    torch.add(score, mask, out=rank)
    if uniform_share is not None:
        rank[:, nu:slots].masked_fill_(~relevant_valid, uniform_share)
    slot_time[:, :nu] = short_time
    slot_time[:, nu:slots] = relevant_time
    return slot_data


def _ordered_result(slot_data: Tensor, history: Tensor, attention: Tensor, y: Tensor,
                    time: Tensor, nu: int, c: Tensor | None) -> ScreenedResult:
    """The state in its layout (S oldest first) from the forward's final slots, and the
    traces in the order [S oldest first, R] from each step's ``history`` and ``attention``."""
    steps, batch, hidden = y.shape
    slots, device, wide = attention.shape[2], y.device, 2 * hidden
    content = slot_data[..., :hidden]
    score, mask, _, slot_time = (slot_data[..., wide + column] for column in range(4))
    last = (steps + torch.arange(nu, device=device)) % nu
    order = torch.arange(slots, device=device).expand(steps, slots).clone()
    order[:, :nu] = (torch.arange(1, steps + 1, device=device).unsqueeze(1)
                     + torch.arange(nu, device=device)) % nu
    order = order.view(steps, 1, slots, 1).expand(steps, batch, slots, 4)
    ordered = history.gather(2, order)
    step_valid = ordered[..., 1] == 0
    valid, final_time = mask == 0, slot_time.long()
    traces = {
        "attention": attention.gather(2, order[..., 0]),
        "slot_time": ordered[..., 3].long().masked_fill_(~step_valid, -1),
        "relevant_valid": step_valid[..., nu:],
        "relevant_score": ordered[:, :, nu:, 0],
    }
    return ScreenedResult(
        y=y, c=c, t=time[-1] + 1,
        short=content[:, last], short_score=score[:, last], short_valid=valid[:, last],
        short_time=final_time[:, last],
        relevant=content[:, nu:slots].clone(), relevant_score=score[:, nu:slots].clone(),
        relevant_valid=valid[:, nu:slots], relevant_time=final_time[:, nu:slots],
        traces=traces)


def _forward_shapes(lstm: bool, steps: int, batch: int, hidden: int, slots: int,
                    save: bool) -> dict[str, tuple[int, ...]]:
    """The buffers of :func:`_screened_forward`, carved from one block."""
    gates, width = 4 * hidden if lstm else hidden, 2 * hidden + _PAD
    shapes = {
        "slot_data": (batch, slots + 1, width), "entering": (steps, batch, 4),
        "attention": (steps, batch, slots), "history": (steps, batch, slots, 4),
        "e": (steps if save else 1, batch, slots, hidden), "z": (batch, gates + hidden),
        "z_in": (batch, gates + hidden), "candidate": (batch, width),
        **BaseRecurrence.shapes(lstm, steps, batch, hidden, save)}
    if save:
        shapes["evicted"] = (steps, batch, width)
    return shapes


def _screened_forward(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor | None,
                      short: Tensor, short_score: Tensor, short_valid: Tensor,
                      short_time: Tensor, relevant: Tensor, relevant_score: Tensor,
                      relevant_valid: Tensor, relevant_time: Tensor, t0: Tensor,
                      resets: Tensor, any_reset: list[bool], *, lstm: bool,
                      uniform_share: float | None,
                      save: bool) -> tuple[ScreenedResult, _ScreenedTape | None]:
    (steps, batch, _), hidden = xp.shape, s0.shape[1]
    nu, slots = short.shape[1], short.shape[1] + relevant.shape[1]
    gates = 4 * hidden if lstm else hidden
    block, buffers = carve(_forward_shapes(lstm, steps, batch, hidden, slots, save), xp.dtype,
                           xp.device)
    long_block, long_buffers = carve({"targets": (steps, batch)}, torch.long, xp.device)
    native = compiled.ops(xp)
    onednn = native is not None and in_onednn(xp)
    kernels = _triton_loops(xp, hidden, slots) if native is None else None
    base = BaseRecurrence(lstm, steps, hidden, c0, save, buffers, views=not (native or kernels))
    recurrent_t, key_t, score_vector = weights.recurrent.t(), weights.key.t(), weights.score
    slot_data = _fill_slots(buffers["slot_data"], key_t, short, short_score, short_valid,
                            short_time, relevant, relevant_score, relevant_valid, relevant_time,
                            uniform_share)
    time = episode_time(t0, resets)
    entering = buffers["entering"].zero_()  # h_k's [score, mask, rank, episode step]
    entering[..., 3] = time
    y = xp.new_empty(steps, batch, hidden)
    attention, history, e, z = (buffers[name] for name in ("attention", "history", "e", "z"))
    evicted, candidate = buffers.get("evicted"), buffers["candidate"]
    targets = long_buffers["targets"]
    # z's input terms: the step's projected input, then the query bias (copied per step
    # rather than concatenated over the chunk: a fresh (T, B, G + H) tensor costs more here).
    z_in = buffers["z_in"]
    z_in[:, gates:] = weights.query_bias
    if native is not None:
        empty = xp.new_empty(0)
        saved = native.screened_forward(
            xp, s0, resets, recurrent_t, key_t, score_vector, slot_data, z_in, z, entering, e,
            attention, history, targets, evicted if evicted is not None else empty, y,
            buffers.get("act", empty), buffers.get("partner", empty), buffers["minus_one"], nu,
            lstm, uniform_share is not None,
            uniform_share if uniform_share is not None else 0.0, save, onednn)
        before_reset = dict(zip((k for k in range(steps) if any_reset[k]), saved,
                                strict=False))
    elif kernels is not None:
        before_reset = kernels.forward_loop(xp, s0, resets, any_reset, weights, buffers,
                                            targets, y, nu, uniform_share)
    else:
        before_reset = _screened_loop(
            xp, s0, resets, any_reset, base, weights, slot_data, z_in, z, entering, e,
            attention, history, targets, evicted, candidate, y, nu, uniform_share, save)

    result = _ordered_result(slot_data, history, attention, y, time, nu,
                             base.final_c() if lstm else None)
    if not save:
        WORKSPACE.give(block, long_block)
        return result, None
    assert evicted is not None
    tape = _ScreenedTape(nu, base, weights, y, s0, attention, slot_data, e, targets, evicted,
                         before_reset, torch.cat([short, relevant], dim=1), resets, any_reset,
                         (block, long_block), kernels is not None, onednn)
    return result, tape


def _triton_loops(like: Tensor, hidden: int, slots: int) -> ModuleType | None:
    """The Triton kernels' loops (:mod:`.gpu.screened`), if they run a chunk like ``like`` of
    ``hidden`` and ``slots`` (``ν + ρ``); where they cannot, :func:`.gpu.fallback` says why."""
    return gpu.kernels(like, "screened", lambda loops: loops.uncovered(hidden, slots))


def kernels_take_short_chunk(xp: Tensor, hidden: int, slots: int, normalised: bool) -> bool:
    """Whether a chunk too short for the engine on the CPU (``xp`` ``(T, B, G)``, no autograd:
    :func:`.attentive_paths.wants_engine` said no) runs :func:`screened_scan` through the
    Triton kernels: where they run, the cell's Python step costs dozens of launches a step and
    the engine's set-up a few a chunk; Algorithm 1's single steps take
    :func:`screened_step`'s one kernel instead. ``hidden`` and ``slots`` (``ν + ρ``)."""
    if xp.shape[0] == 1 and not normalised:
        return False
    return _triton_loops(xp, hidden, slots) is not None


def _attention_backward(d_weights: Tensor, weights: Tensor, e: Tensor, score_vector: Tensor,
                        d_logits: Tensor, d_pre: Tensor, dz_query: Tensor,
                        grad_keys: Tensor) -> None:
    """One step's attention backward from the gradient of its weights ``(B, N)``: into
    ``d_logits``, the query's pre-activation ``dz_query`` and, added, the keys' ``grad_keys``.

    d(2 W_a s + 2 U_a m_i) = dlogit_i σ'(.) ⊙ 2 v_a: ``d_pre`` holds dlogit_i σ'(.), and each
    use multiplies by 2 v_a (one pass fewer over the slots)."""
    torch.ops.aten._softmax_backward_data.out(d_weights, weights, 1, weights.dtype,
                                              grad_input=d_logits)
    _sigmoid_backward.grad_input(d_logits.unsqueeze(2), e, grad_input=d_pre)
    torch.sum(d_pre, dim=1, out=dz_query).mul_(score_vector)
    grad_keys.addcmul_(d_pre, score_vector)


def _undo_screening(rows_of_grad: Tensor, rows_of_slots: Tensor, rows_p: Tensor,
                    target: Tensor, evicted: Tensor, grad_candidate: Tensor,
                    restored: Tensor) -> None:
    """Undo one step's screening write (:func:`_screen_oldest`) in the slots' gradient and in
    the slots themselves: the candidate goes back from its target row to ``rows_p`` with the
    gradient it gathered there, and the target row gets back what it held, ``evicted``."""
    rows_of_grad.index_copy_(0, rows_p, torch.index_select(rows_of_grad, 0, target,
                                                           out=grad_candidate))
    rows_of_grad.index_fill_(0, target, 0.0)
    rows_of_slots.index_copy_(0, rows_p, torch.index_select(rows_of_slots, 0, target,
                                                            out=restored))
    rows_of_slots.index_copy_(0, target, evicted)


def _screened_backward_loop(tape: _ScreenedTape, g_y: Tensor | None, g_c: Tensor | None,
                            grad: Tensor, buffers: dict[str, Tensor]
                            ) -> tuple[Tensor, Tensor | None]:
    """The backward loop of :func:`_screened_backward` in Python, over its buffers (the
    compiled ``screened_backward`` is the same loop); returns the gradients of ``s0`` and
    ``c0``."""
    base, y, nu = tape.base, tape.y, tape.nu
    steps, batch, hidden = y.shape
    slots, gates, wide = tape.attention.shape[2], base.gates, 2 * hidden
    recurrent, key, score_vector, _ = tape.weights
    rows_of_grad = grad.view(-1, wide + 1)
    grad_content, grad_keys = grad[:, :slots, :hidden], grad[:, :slots, hidden:wide]
    first_row = torch.arange(batch, device=y.device) * (slots + 1)
    ring = [(first_row + p, grad[:, p, :hidden], grad[:, p, hidden:wide])
            for p in range(min(nu, steps))]
    grad_candidate, d_pre, d_act = buffers["grad_candidate"], buffers["d_pre"], buffers["d_act"]
    d_act_parts = (d_act[:, :3], d_act[:, 3])
    dc_buffers = buffers["dc"].unbind(0)
    d_keys_h, d_logits, dz = buffers["d_keys_h"], buffers["d_logits"], buffers["dz"]
    dz_steps = dz.unbind(0)
    dz_base = (dz[:, :, :gates].view(steps, batch, 4, hidden) if base.lstm
               else dz[:, :, :gates]).unbind(0)
    dz_query = dz[:, :, gates:].unbind(0)
    attention_steps, attention_columns = tape.attention.unbind(0), \
        tape.attention.unsqueeze(3).unbind(0)
    # The slots as step k saw them: the forward's final slots, the writes of later steps undone
    # one step at a time going back.
    slot_data, e_steps = tape.slot_data, tape.e.unbind(0)
    rows_of_slots = slot_data.view(-1, slot_data.shape[2])
    memory_columns = slot_data[:, :slots, :hidden].transpose(1, 2)
    contents = [slot_data[:, p, :hidden] for p in range(min(nu, steps))]
    h_steps, evicted_steps, restored = buffers["h"].unbind(0), tape.evicted.unbind(0), \
        buffers["restored"]
    d_logits_steps = d_logits.unbind(0)
    target_steps, d_keys_steps = tape.targets.unbind(0), d_keys_h.unbind(0)
    g_y_steps = g_y.unbind(0) if g_y is not None else None
    ds = g_y_steps[-1] if g_y_steps is not None else y.new_zeros(batch, hidden)
    dc = g_c
    for k in reversed(range(steps)):
        oldest = k % nu
        ds_row = ds.unsqueeze(1)
        # (B, 1, H) @ (B, H, N): several times faster on CPU than (B, N, H) @ (B, H, 1)
        d_weights = torch.bmm(ds_row, memory_columns).view(batch, slots)
        _attention_backward(d_weights, attention_steps[k], e_steps[k], score_vector,
                            d_logits_steps[k], d_pre, dz_query[k], grad_keys)
        grad_content.addcmul_(attention_columns[k], ds_row)
        # Undo the writes of step k: h_k leaves slot p with its gradient; the candidate comes
        # back to p with the gradient it gathered at its target, which held nothing before.
        rows_p, grad_content_p, grad_keys_p = ring[oldest]
        dh = torch.addmm(ds + grad_content_p, d_keys_steps[k].copy_(grad_keys_p), key)
        h = h_steps[k].copy_(contents[oldest])
        _undo_screening(rows_of_grad, rows_of_slots, rows_p, target_steps[k], evicted_steps[k],
                        grad_candidate, restored)
        if k in tape.before_reset:
            slot_data.copy_(tape.before_reset[k])
        dc = base.backward(k, h, dh, dc, dz_base[k], d_act, d_act_parts, dc_buffers[k % 2])
        g_previous = g_y_steps[k - 1] if g_y_steps is not None and k > 0 else None
        reset = tape.resets[k].view(batch, 1, 1) if tape.reset_steps[k] else None
        ds, dc = _into_previous_step(dz_steps[k], recurrent, g_previous, grad, dc, reset)
    return ds, dc


def _into_previous_step(dz: Tensor, recurrent: Tensor, g_previous: Tensor | None,
                        grad: Tensor, dc: Tensor | None, reset: Tensor | None
                        ) -> tuple[Tensor, Tensor | None]:
    """The gradients of the step's incoming macro-state and cell state; where an item resets
    (``reset`` ``(B, 1, 1)``, or ``None``), none crosses, nor into its slots' ``grad``."""
    if reset is None:
        return state_gradient(dz, recurrent, g_previous, None), dc
    ds = state_gradient(dz, recurrent, g_previous, reset[:, 0])
    cut_gradient(grad, reset, in_place=True)
    return ds, cut_gradient(dc, reset[:, 0]) if dc is not None else None


def _final_slots_gradient(grad: Tensor, steps: int, nu: int, g_short: Tensor | None,
                          g_short_score: Tensor | None, g_relevant: Tensor | None,
                          g_relevant_score: Tensor | None) -> Tensor:
    """The gradient of what each slot holds after the chunk, [m_i, 2 U_a m_i, score], laid out
    as the forward's slots (S in ring order), written into ``grad`` ``(B, ν+ρ+1, 2H+1)``.

    Going back in time it follows the states as the forward moved them: undoing the writes of
    step k hands h_k its gradient and gives the candidate back its own."""
    hidden, slots = (grad.shape[2] - 1) // 2, grad.shape[1] - 1
    wide = 2 * hidden
    grad.zero_()
    last = (steps + torch.arange(nu, device=grad.device)) % nu
    if g_short is not None:
        grad[:, last, :hidden] = g_short
    if g_relevant is not None:
        grad[:, nu:slots, :hidden] = g_relevant
    if g_short_score is not None:
        grad[:, last, wide] = g_short_score
    if g_relevant_score is not None:
        grad[:, nu:slots, wide] = g_relevant_score
    return grad


def _screened_backward(tape: _ScreenedTape, g_y: Tensor | None, g_c: Tensor | None,
                       g_short: Tensor | None, g_short_score: Tensor | None,
                       g_relevant: Tensor | None, g_relevant_score: Tensor | None
                       ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None,
                                  Tensor, Tensor, Tensor, Tensor]:
    """Gradients of ``xp``, the four weights, ``s0``, ``c0``, ``short``, ``short_score``,
    ``relevant`` and ``relevant_score``."""
    base, weights, y, nu = tape.base, tape.weights, tape.y, tape.nu
    steps, batch, hidden = y.shape
    slots = tape.attention.shape[2]
    gates = base.gates
    recurrent, key, score_vector, _ = weights
    wide = 2 * hidden
    block, buffers = carve({
        "grad": (batch, slots + 1, wide + 1), "grad_candidate": (batch, wide + 1),
        "d_keys_h": (steps, batch, hidden), "d_logits": (steps, batch, slots),
        "d_pre": (batch, slots, hidden), "d_act": (batch, 4, hidden),
        "dc": (2, batch, 1, hidden), "dz": (steps, batch, recurrent.shape[0]),
        "s_prev": (steps, batch, hidden), "h": (steps, batch, hidden),
        "restored": (batch, tape.slot_data.shape[2])}, y.dtype, y.device)
    grad = _final_slots_gradient(buffers["grad"], steps, nu, g_short, g_short_score,
                                 g_relevant, g_relevant_score)
    grad_content, grad_keys = grad[:, :slots, :hidden], grad[:, :slots, hidden:wide]
    d_keys_h, d_logits, dz = buffers["d_keys_h"], buffers["d_logits"], buffers["dz"]
    native = compiled.ops(y)
    if native is not None:
        empty = y.new_empty(0)
        ds, dc = native.screened_backward(
            g_y if g_y is not None else empty, g_c if g_c is not None else empty, tape.resets,
            recurrent, key, score_vector, tape.attention, tape.e, tape.targets, tape.evicted,
            [tape.before_reset[k] for k in sorted(tape.before_reset)], tape.slot_data, grad,
            dz, d_logits, d_keys_h, buffers["h"], buffers["dc"],
            base.act if base.lstm else empty, base.partner if base.lstm else empty, nu,
            base.lstm, tape.onednn)
        dc = dc if dc.numel() else None
    elif tape.kernels:
        from rlmem.cells._engines.gpu import screened as triton_loops
        ds, dc = triton_loops.backward_loop(
            g_y, g_c, tape.resets, tape.before_reset, recurrent, key.contiguous(),
            score_vector, tape.attention, tape.e, tape.targets, tape.evicted, tape.slot_data,
            grad, dz, d_logits, d_keys_h, buffers["h"],
            (base.act, base.partner) if base.lstm else None, nu)
    else:
        ds, dc = _screened_backward_loop(tape, g_y, g_c, grad, buffers)
        dc = dc.clone() if dc is not None else None  # not a view of the block given back

    d_recurrent, d_key = _weight_gradients(tape, y, dz, d_keys_h, grad_keys, buffers)
    d_incoming = torch.baddbmm(grad_content, grad_keys, key.expand(batch, -1, -1))
    d_score_in = grad[:, :slots, wide].clone()
    # d(2 v_a) = Σ dlogit_i e_i, as (1, N) @ (N, H) products over every step and batch item
    d_score = torch.bmm(d_logits.view(-1, 1, slots),
                        tape.e.view(-1, slots, hidden)).sum(dim=(0, 1))
    d_xp, d_query_bias = dz[:, :, :gates].contiguous(), dz[:, :, gates:].sum(dim=(0, 1))
    WORKSPACE.give(block, *tape.blocks)
    return (d_xp, d_recurrent, d_key, d_score, d_query_bias, ds, dc, d_incoming[:, :nu],
            d_score_in[:, :nu], d_incoming[:, nu:], d_score_in[:, nu:])


def _weight_gradients(tape: _ScreenedTape, y: Tensor, dz: Tensor, d_keys_h: Tensor,
                      grad_keys: Tensor, buffers: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    """The recurrent weight's and 2 U_a's gradients from the whole chunk's: in the blocked
    loop where the forward's products left ATen's (``tape.onednn``), else ATen's."""
    hidden = y.shape[2]
    s_prev = previous_states(buffers["s_prev"], tape.s0, y, tape.resets)
    d_recurrent = loop_weight_gradient(s_prev.view(-1, hidden), dz.view(-1, dz.shape[2]),
                                       tape.onednn)
    # 2 U_a is applied once per state (h_k, or an incoming one), not once per read of it.
    d_key = torch.addmm(loop_weight_gradient(buffers["h"].view(-1, hidden),
                                             d_keys_h.view(-1, hidden), tape.onednn),
                        grad_keys.reshape(-1, hidden).t(), tape.incoming.view(-1, hidden))
    return d_recurrent, d_key


class _Screened(torch.autograd.Function):
    """:func:`_screened_forward` and :func:`_screened_backward` as one autograd node per chunk."""

    @staticmethod
    def forward(ctx: FunctionCtx, any_reset: list[bool], uniform_share: float | None,
                resets: Tensor,
                t0: Tensor, short_valid: Tensor, short_time: Tensor, relevant_valid: Tensor,
                relevant_time: Tensor, xp: Tensor, recurrent: Tensor, key: Tensor,
                score: Tensor, query_bias: Tensor, s0: Tensor, c0: Tensor | None,
                short: Tensor, short_score: Tensor, relevant: Tensor,
                relevant_score: Tensor) -> tuple[Any, ...]:
        result, tape = _screened_forward(
            xp, Weights(recurrent, key, score, query_bias), s0, c0, short, short_score,
            short_valid,
            short_time, relevant, relevant_score, relevant_valid, relevant_time, t0, resets,
            any_reset, lstm=c0 is not None, uniform_share=uniform_share, save=True)
        ctx.tape = tape  # type: ignore[attr-defined]
        ctx.set_materialize_grads(False)
        outputs = _flatten(result)
        ctx.mark_non_differentiable(*outputs[len(_DIFFERENTIABLE):])
        needs = ctx.needs_input_grad  # type: ignore[attr-defined]
        if not (needs[_SCORE_INPUTS[0]] or needs[_SCORE_INPUTS[1]]):
            # The scores only carry the incoming scores' gradient (the attention is detached).
            ctx.mark_non_differentiable(result.short_score, result.relevant_score)
        return outputs

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, *grads: Tensor | None) -> tuple[Tensor | None, ...]:
        tape: _ScreenedTape | None = ctx.tape  # type: ignore[attr-defined]
        if tape is None:
            raise RuntimeError("an attentive cell's chunk can be backpropagated once: its "
                               "backward reuses the forward's buffers (no retain_graph)")
        ctx.tape = None  # type: ignore[attr-defined]
        return (None,) * 8 + _screened_backward(tape, *grads[:len(_DIFFERENTIABLE)])


_SCORE_INPUTS = (16, 18)
"""Positions of ``short_score`` and ``relevant_score`` among :meth:`_Screened.forward`'s
inputs (``ctx`` not counted)."""


_TRACES = ("attention", "slot_time", "relevant_valid", "relevant_score")


def _flatten(result: ScreenedResult) -> tuple[Any, ...]:
    """The differentiable outputs first (a ``None`` ``c`` stays ``None``), then the rest."""
    rest = (result.t, result.short_valid, result.short_time, result.relevant_valid,
            result.relevant_time, *(result.traces[key] for key in _TRACES))
    return (*(getattr(result, key) for key in _DIFFERENTIABLE), *rest)


def screened_scan(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor | None, short: Tensor,
                  short_score: Tensor, short_valid: Tensor, short_time: Tensor,
                  relevant: Tensor, relevant_score: Tensor, relevant_valid: Tensor,
                  relevant_time: Tensor, t0: Tensor, resets: Tensor, *,
                  uniform_share: float | None) -> ScreenedResult | None:
    """Relevancy screening (ReLSTM with ``c0``, ReLRNN without) over one chunk.

    Equivalent to running the cell's step under :func:`rlmem.cells.time_loop.scan`; see
    :class:`rlmem.cells.screening.RelevancyScreening` for the equations. With
    ``uniform_share`` it screens as ``Screening.normalised`` does (each attention weight
    counted relative to the uniform share of its step, and a free slot of R ranked at
    ``uniform_share``); with ``None``, as Algorithm 1. Returns ``None``
    when the engine cannot take the chunk (a dtype other than float32 and float64, or an
    episode longer than its float holds exactly), for the caller to run the step instead.

    Shapes:
        - xp: ``(T, B, G)``, the base's input terms (``G = 4H`` for the LSTM, ``H`` for the
          tanh-RNN)
        - s0, c0: ``(B, H)``; short ``(B, ν, H)``, oldest first; relevant ``(B, ρ, H)``;
          the scores, valid masks and times ``(B, ν)`` and ``(B, ρ)``; t0 ``(B,)`` long
        - resets: ``(T, B)`` bool
    """
    if xp.dtype not in TIME_LIMIT:
        return None
    any_reset, fits = chunk_flags(resets, t0, xp.dtype)
    if not fits:
        return None
    tensors = (xp, *weights, s0, c0, short, short_score, relevant, relevant_score)
    if not needs_graph(tensors):
        return _screened_forward(xp, weights, s0, c0, short, short_score, short_valid,
                                 short_time, relevant, relevant_score, relevant_valid,
                                 relevant_time, t0, resets, any_reset, lstm=c0 is not None,
                                 uniform_share=uniform_share, save=False)[0]
    outputs = _Screened.apply(any_reset, uniform_share, resets, t0, short_valid, short_time,
                              relevant_valid, relevant_time, xp, *weights, s0, c0, short,
                              short_score, relevant, relevant_score)
    differentiable = dict(zip(_DIFFERENTIABLE, outputs, strict=False))
    t, short_valid, short_time, relevant_valid, relevant_time, *traces = outputs[
        len(_DIFFERENTIABLE):]
    return ScreenedResult(**differentiable, t=t, short_valid=short_valid, short_time=short_time,
                          relevant_valid=relevant_valid, relevant_time=relevant_time,
                          traces=dict(zip(_TRACES, traces, strict=True)))


class _ScreenedFields(NamedTuple):
    """The screened cells' state fields, for :func:`rlmem.cells.time_loop.reset_state`."""

    s: Tensor
    c: Tensor
    t: Tensor
    short: Tensor
    short_score: Tensor
    short_valid: Tensor
    short_time: Tensor
    relevant: Tensor
    relevant_score: Tensor
    relevant_valid: Tensor
    relevant_time: Tensor


def screened_step(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor | None, short: Tensor,
                  short_score: Tensor, short_valid: Tensor, short_time: Tensor,
                  relevant: Tensor, relevant_score: Tensor, relevant_valid: Tensor,
                  relevant_time: Tensor, t0: Tensor, resets: Tensor) -> ScreenedResult | None:
    """Relevancy screening's step for one rollout step without autograd, compiled
    (``csrc/screened_step.h``) on the CPU, a Triton kernel (:func:`.gpu.screened.rollout_step`)
    on CUDA: the cell's step, Algorithm 1's screening on a tanh or LSTM
    base. ``None`` where it does not apply (more than one step, autograd, another dtype,
    neither compiled loops nor kernels), for the caller to run the step in Python.

    Shapes: as :func:`screened_scan`, with ``T = 1``.
    """
    native = compiled.ops(xp)
    tensors = (xp, *weights, s0, c0, short, short_score, relevant, relevant_score)
    if (xp.shape[0] != 1 or xp.dtype not in TIME_LIMIT
            or needs_graph(tensors)):
        return None
    if native is None:  # on CUDA, the kernels' step
        kernels = _triton_loops(xp, s0.shape[1], short.shape[1] + relevant.shape[1])
        if kernels is None:
            return None
        y, c, t, memory, attention, slot_time = kernels.rollout_step(
            xp[0], weights, s0, c0, (short, short_score, short_valid, short_time, relevant,
                                     relevant_score, relevant_valid, relevant_time),
            t0, resets[0])
        return _step_result(y, c, t, memory, attention, slot_time)
    empty = xp.new_empty(0)
    fields = _ScreenedFields(s0, c0 if c0 is not None else s0, t0, short, short_score,
                             short_valid, short_time, relevant, relevant_score,
                             relevant_valid, relevant_time)
    if any_reset(resets):  # on the CPU, reading the flag costs no sync
        fields = _ScreenedFields(*reset_state(fields, resets[0]))
    y, c, t, *memory, attention, slot_time = native.screened_step(
        xp[0], fields.s, fields.c if c0 is not None else empty, *fields[2:], *weights)
    return _step_result(y, c if c0 is not None else None, t, tuple(memory), attention,
                        slot_time)


def _step_result(y: Tensor, c: Tensor | None, t: Tensor, memory: tuple[Tensor, ...],
                 attention: Tensor, slot_time: Tensor) -> ScreenedResult:
    """A rollout step's result from the step's output ``(B, H)``, the new state's fields
    (``memory``: S's content, score, valid and time, then R's) and its traces."""
    short, short_score, short_valid, short_time, relevant, relevant_score, relevant_valid, \
        relevant_time = memory
    traces = {"attention": attention, "slot_time": slot_time,
              "relevant_valid": relevant_valid, "relevant_score": relevant_score}
    return ScreenedResult(
        y=y.unsqueeze(0), c=c, t=t, short=short,
        short_score=short_score, short_valid=short_valid, short_time=short_time,
        relevant=relevant, relevant_score=relevant_score, relevant_valid=relevant_valid,
        relevant_time=relevant_time,
        traces={key: value.unsqueeze(0) for key, value in traces.items()})

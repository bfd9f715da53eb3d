r"""The time loop of the attentive cells, a chunk at a time, with a hand-written backward.

ReLSTM, ReLRNN and MemLSTM (:mod:`rlmem.cells.relevancy`, :mod:`rlmem.cells.memlstm`) define one
step in their docstrings. Run step by step under autograd, that step costs dozens of small
tensor ops and as many backward nodes, and MemLSTM copied its whole memory on every step. Here
the loop runs without autograd over preallocated buffers, records what the backward needs, and
:class:`torch.autograd.Function` subclasses run the backward loop by hand. Parameter gradients
are summed over the chunk in a few large matmuls after the loop.

The math is the cells' own. Two identities are used, and they change only rounding:

- :math:`\tanh(x) = 2\sigma(2x) - 1`. On CPU, torch's ``tanh`` is several times slower than its
  ``sigmoid``, and the attention evaluates one per memory slot and feature. The factors 2 are
  folded into the weights by the cells (see :class:`Weights`), so no extra pass is needed.
- The attention score :math:`v_a^\top \tanh(\cdot) = 2 v_a^\top \sigma(2\,\cdot) - \sum v_a`
  differs from :math:`2 v_a^\top \sigma(2\,\cdot)` by a constant over the slots, which the
  softmax cancels.

Both engines are GPU-safe: a chunk's shapes are fixed when the loop starts, the host reads the
reset pattern (and for MemLSTM the longest episode) once per chunk before the loop, and nothing
inside the loop waits for the device.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

_sigmoid_backward = torch.ops.aten.sigmoid_backward
_tanh_backward = torch.ops.aten.tanh_backward


class Weights(NamedTuple):
    r"""Weights as the engines use them, built by the cell under autograd on every call.

    ``z = xp[t] + s_{t-1} W^\top`` gives both the base pre-activation and the attention query
    in one matmul (``xp`` from the cell's ``project_input`` carries the input terms and biases).
    Every pre-activation that goes through a ``tanh`` is doubled so that the engine can use
    :math:`2\sigma(2x) - 1`: the ``g`` block of the LSTM (or the whole tanh-RNN pre-activation),
    the query, the keys and the score vector.
    """

    recurrent: Tensor
    """``(G + H, H)``: the base's recurrent weights (``G`` rows) over ``2 W_a``."""
    key: Tensor
    """``(H, H)``: ``2 U_a``."""
    score: Tensor
    """``(H,)``: ``2 v_a``."""


def reset_steps(resets: Tensor) -> list[bool]:
    """Which steps reset some batch item: the one host sync of a chunk, before its loop."""
    return resets.any(dim=1).tolist()


def episode_time(t0: Tensor, resets: Tensor) -> Tensor:
    """``(T, B)`` long: steps since the episode started at each step, before that step.

    Step ``k`` of item ``b`` is ``k - r`` after its last reset ``r ≤ k``, else ``t0[b] + k``.
    """
    steps = resets.shape[0]
    index = torch.arange(steps, device=resets.device).unsqueeze(1)
    last = torch.where(resets, index, -1).cummax(dim=0).values
    return torch.where(last >= 0, index - last, t0.unsqueeze(0) + index)


# --- the base recurrences ---------------------------------------------------------------------


class _Base:
    """One base recurrence (LSTM or tanh-RNN): forward into preallocated buffers, backward.

    ``z`` is the pre-activation block of the base (``4H`` for the LSTM, ``H`` for the RNN), with
    every tanh pre-activation doubled (see :class:`Weights`).
    """

    def __init__(self, lstm: bool, steps: int, batch: int, hidden: int, like: Tensor,
                 c0: Tensor | None, save: bool) -> None:
        self.lstm = lstm
        self.hidden = hidden
        rows = steps if save else 1
        self.save = save
        if lstm:
            assert c0 is not None
            self.act = like.new_empty(rows, batch, 4 * hidden)  # i, f, σ(2 z_g), o
            self.g = like.new_empty(rows, batch, hidden)  # tanh(z_g)
            self.tc = like.new_empty(rows, batch, hidden)  # tanh(c_t)
            # c[k] is c_{k-1} after any reset at step k; c[T] is the final cell state.
            self.c = like.new_empty(steps + 1, batch, hidden)
            self.c[0] = c0
        self.h = like.new_empty(rows, batch, hidden)  # h_t, which the bank of states reads

    @property
    def gates(self) -> int:
        return 4 * self.hidden if self.lstm else self.hidden

    def reset(self, k: int, reset: Tensor) -> None:
        if self.lstm:
            self.c[k].masked_fill_(reset.unsqueeze(1), 0.0)

    def forward(self, k: int, z: Tensor) -> Tensor:
        """``h_k`` from the base block of ``z``."""
        row = k if self.save else 0
        h = self.h[row]
        if not self.lstm:
            torch.sigmoid(z, out=h)
            return h.mul_(2.0).sub_(1.0)
        hidden = self.hidden
        act, g, tc = self.act[row], self.g[row], self.tc[row]
        torch.sigmoid(z, out=act)
        i, f, o = act[:, :hidden], act[:, hidden:2 * hidden], act[:, 3 * hidden:]
        torch.mul(act[:, 2 * hidden:3 * hidden], 2.0, out=g).sub_(1.0)
        c = torch.mul(f, self.c[k], out=self.c[k + 1]).addcmul_(i, g)
        torch.sigmoid(c * 2.0, out=tc).mul_(2.0).sub_(1.0)
        return torch.mul(o, tc, out=h)

    def final_c(self) -> Tensor:
        return self.c[-1]

    def backward(self, k: int, dh: Tensor, dc: Tensor | None, dz: Tensor) -> Tensor | None:
        """Write the gradient of the base block of ``z`` into ``dz``; return that of ``c_{k-1}``."""
        if not self.lstm:
            # z is the doubled pre-activation: d tanh(z / 2) / dz = (1 - h²) / 2.
            _tanh_backward.grad_input(dh, self.h[k], grad_input=dz).mul_(0.5)
            return None
        hidden = self.hidden
        act, g, tc, c_prev = self.act[k], self.g[k], self.tc[k], self.c[k]
        i, f, o = act[:, :hidden], act[:, hidden:2 * hidden], act[:, 3 * hidden:]
        dc = _tanh_backward(dh * o, tc) if dc is None else _tanh_backward(dh * o, tc).add_(dc)
        dact = torch.empty_like(act)
        torch.mul(dc, g, out=dact[:, :hidden])
        torch.mul(dc, c_prev, out=dact[:, hidden:2 * hidden])
        torch.mul(dc, i, out=dact[:, 2 * hidden:3 * hidden]).mul_(2.0)
        torch.mul(dh, tc, out=dact[:, 3 * hidden:])
        _sigmoid_backward.grad_input(dact, act, grad_input=dz)
        return dc * f


# --- attention --------------------------------------------------------------------------------


def _attend(query: Tensor, keys: Tensor, memory: Tensor, invalid: Tensor, score: Tensor,
            e_out: Tensor) -> Tensor:
    """Softmax weights of the (doubled) additive scores over the valid slots.

    ``e_out`` receives :math:`\\sigma(2 W_a s + 2 U_a m_i)`, which the backward reads.

    Shapes: query ``(B, H)``; keys, memory, e_out ``(B, N, H)``; invalid ``(B, N)`` bool.
    """
    e = torch.add(keys, query.unsqueeze(1), out=e_out).sigmoid_()
    logits = torch.matmul(e, score).masked_fill_(invalid, float("-inf"))
    return torch.softmax(logits, dim=-1)


def _attend_backward(dread: Tensor, weights: Tensor, e: Tensor, memory: Tensor,
                     score: Tensor) -> tuple[Tensor, Tensor]:
    """Gradients of the score logits and of the pre-activation ``2(W_a s + U_a m_i)``.

    Shapes: dread ``(B, H)``; weights ``(B, N)``; e, memory ``(B, N, H)``.
    """
    dweights = torch.bmm(memory, dread.unsqueeze(2)).squeeze(2)
    dlogits = torch._softmax_backward_data(dweights, weights, -1, weights.dtype)
    dpre = _sigmoid_backward(dlogits.unsqueeze(2) * score, e)
    return dlogits, dpre


# --- relevancy screening (ReLSTM, ReLRNN) -----------------------------------------------------


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
    base: _Base
    weights: Weights
    y: Tensor
    s0: Tensor
    attention: Tensor  # (T, B, ν+ρ): the weights, S in ring order
    memory: Tensor  # (T, B, ν+ρ, H): the slots' states at each step, S in ring order
    e: Tensor  # (T, B, ν+ρ, H): σ(2 W_a s + 2 U_a m_i); the backward overwrites it
    targets: Tensor  # (T, B) long: the slot each step's candidate was written to
    resets: Tensor
    reset_steps: list[bool]


def _screened_forward(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor | None,
                      short: Tensor, short_score: Tensor, short_valid: Tensor,
                      short_time: Tensor, relevant: Tensor, relevant_score: Tensor,
                      relevant_valid: Tensor, relevant_time: Tensor, t0: Tensor,
                      resets: Tensor, *, lstm: bool,
                      save: bool) -> tuple[ScreenedResult, _ScreenedTape | None]:
    steps, batch, _ = xp.shape
    hidden = s0.shape[1]
    nu, rho = short.shape[1], relevant.shape[1]
    slots = nu + rho
    scratch = slots
    base = _Base(lstm, steps, batch, hidden, xp, c0, save)
    gates = base.gates
    recurrent_t, key_t, score_vector = weights.recurrent.t(), weights.key.t(), weights.score
    device = xp.device

    # The memory, slot by slot: S as a ring buffer (at step k its oldest state sits in slot
    # k mod ν, where h_k then goes), then R, then a scratch slot that takes the write of a
    # candidate that does not enter R, so that no step branches per batch item. A slot holds
    # [m_i, 2 U_a m_i, score] in one row, so that a screening write moves all of it at once,
    # and [valid, episode step] in ``meta``.
    slot_data = xp.new_empty(batch, slots + 1, 2 * hidden + 1)
    content, keys, score = (slot_data[..., :hidden], slot_data[..., hidden:2 * hidden],
                            slot_data[..., 2 * hidden])
    content[:, :nu] = short
    content[:, nu:slots] = relevant
    keys[:, :slots] = torch.matmul(content[:, :slots], key_t)
    score[:, :nu] = short_score
    score[:, nu:slots] = relevant_score
    slot_data[:, scratch] = 0.0
    meta = torch.zeros(batch, slots + 1, 2, dtype=torch.long, device=device)
    meta[:, :nu, 0] = short_valid
    meta[:, nu:slots, 0] = relevant_valid
    meta[:, :nu, 1] = short_time
    meta[:, nu:slots, 1] = relevant_time
    time = episode_time(t0, resets)
    entering_meta = torch.stack([torch.ones_like(time), time], dim=2)  # h_k's [valid, step]

    y = xp.new_empty(steps, batch, hidden)
    attention = xp.new_empty(steps, batch, slots)
    memory = xp.new_empty(steps, batch, slots, hidden) if save else None
    e = xp.new_empty(steps if save else 1, batch, slots, hidden)
    targets = torch.empty(steps, batch, dtype=torch.long, device=device)
    meta_history = torch.empty(steps, batch, slots, 2, dtype=torch.long, device=device)
    relevant_scores = xp.new_empty(steps, batch, rho)
    # Views made once: indexing costs as much as a small op.
    content_all, keys_all, valid_all = content[:, :slots], keys[:, :slots], meta[:, :slots, 0]
    score_short, score_relevant = score[:, :nu], score[:, nu:slots]
    valid_relevant = meta[:, nu:slots, 0]
    ring = [(slot_data[:, p], meta[:, p], content[:, p], keys[:, p], score[:, p],
             meta[:, p, 0]) for p in range(nu)]
    rows = torch.arange(batch, device=device)
    scratch_index = torch.tensor(scratch, device=device)
    any_reset = reset_steps(resets)
    xp_steps, y_steps, e_steps = xp.unbind(0), y.unbind(0), e.unbind(0)
    minus_inf = float("-inf")
    s = s0
    for k in range(steps):
        data_p, meta_p, content_p, keys_p, score_p, valid_p = ring[k % nu]
        if any_reset[k]:
            reset = resets[k].view(batch, 1, 1)
            s = s.masked_fill(reset[:, 0], 0.0)
            base.reset(k, reset[:, 0, 0])
            slot_data.masked_fill_(reset, 0.0)
            meta.masked_fill_(reset, 0)
        z = torch.addmm(xp_steps[k], s, recurrent_t)
        h = base.forward(k, z[:, :gates])

        # h_{t-ν} leaves S and is screened into R (see relevancy.screen): a free slot of R
        # scores -inf, so the first free slot, else the first lowest score, is the target.
        lowest, slot = score_relevant.masked_fill(valid_relevant == 0, minus_inf).min(dim=1)
        enter = (valid_p != 0) & (score_p > lowest)
        target = torch.where(enter, slot + nu, scratch_index, out=targets[k])
        # (clones: index_put_ refuses a source that overlaps its destination)
        slot_data.index_put_((rows, target), data_p.clone())
        meta.index_put_((rows, target), meta_p.clone())
        # h_t enters S in the slot just vacated.
        content_p.copy_(h)
        torch.mm(h, key_t, out=keys_p)
        score_p.zero_()
        meta_p.copy_(entering_meta[k])

        e_k = torch.add(keys_all, z[:, gates:].unsqueeze(1), out=e_steps[k if save else 0])
        logits = torch.matmul(e_k.sigmoid_(), score_vector).masked_fill_(valid_all == 0,
                                                                         minus_inf)
        weights_k = torch.softmax(logits, dim=1)
        read = torch.bmm(weights_k.unsqueeze(1), content_all).squeeze(1)
        s = torch.add(h, read, out=y_steps[k])
        score_short.add_(weights_k[:, :nu])
        attention[k] = weights_k
        if memory is not None:
            memory[k] = content_all
        meta_history[k] = meta[:, :slots]
        relevant_scores[k] = score_relevant

    # The state in its layout (S oldest first) and the traces, in the order [S oldest first, R].
    last = (steps + torch.arange(nu, device=device)) % nu
    order = torch.arange(slots, device=device).expand(steps, slots).clone()
    order[:, :nu] = (torch.arange(1, steps + 1, device=device).unsqueeze(1)
                     + torch.arange(nu, device=device)) % nu
    order = order.view(steps, 1, slots, 1).expand(steps, batch, slots, 2)
    history = meta_history.gather(2, order)
    step_valid = history[..., 0].bool()
    traces = {
        "attention": attention.gather(2, order[..., 0]),
        "slot_time": history[..., 1].masked_fill_(~step_valid, -1),
        "relevant_valid": step_valid[..., nu:],
        "relevant_score": relevant_scores,
    }
    result = ScreenedResult(
        y=y, c=base.final_c() if lstm else None, t=time[-1] + 1,
        short=content[:, last], short_score=score[:, last],
        short_valid=meta[:, last, 0].bool(), short_time=meta[:, last, 1],
        relevant=content[:, nu:slots].clone(), relevant_score=score[:, nu:slots].clone(),
        relevant_valid=meta[:, nu:slots, 0].bool(), relevant_time=meta[:, nu:slots, 1].clone(),
        traces=traces)
    if not save:
        return result, None
    assert memory is not None
    tape = _ScreenedTape(nu, base, weights, y, s0, attention, memory, e, targets, resets,
                         any_reset)
    return result, tape


def _screened_backward(tape: _ScreenedTape, g_y: Tensor | None, g_c: Tensor | None,
                       g_short: Tensor | None, g_short_score: Tensor | None,
                       g_relevant: Tensor | None, g_relevant_score: Tensor | None
                       ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None, Tensor,
                                  Tensor, Tensor, Tensor]:
    """Gradients of ``xp``, the three weights, ``s0``, ``c0``, ``short``, ``short_score``,
    ``relevant`` and ``relevant_score``."""
    base, weights, y, nu = tape.base, tape.weights, tape.y, tape.nu
    steps, batch, hidden = y.shape
    slots = tape.attention.shape[2]
    gates = base.gates
    recurrent, key, score_vector = weights
    # The gradient of what each slot holds, [m_i, 2 U_a m_i, score], laid out as in the
    # forward's slot_data. Going back in time it follows the states as the forward moved
    # them: undoing step k's writes hands h_k its gradient and the candidate its own.
    grad = y.new_zeros(batch, slots + 1, 2 * hidden + 1)
    last = (steps + torch.arange(nu, device=y.device)) % nu
    if g_short is not None:
        grad[:, last, :hidden] = g_short
    if g_relevant is not None:
        grad[:, nu:slots, :hidden] = g_relevant
    if g_short_score is not None:
        grad[:, last, 2 * hidden] = g_short_score
    if g_relevant_score is not None:
        grad[:, nu:slots, 2 * hidden] = g_relevant_score
    grad_content, grad_keys = grad[:, :slots, :hidden], grad[:, :slots, hidden:2 * hidden]
    ring = [grad[:, p] for p in range(nu)]
    rows = torch.arange(batch, device=y.device)

    dz = y.new_empty(steps, batch, recurrent.shape[0])
    d_score = y.new_zeros(hidden)
    ds = y.new_zeros(batch, hidden)
    dc = g_c
    for k in reversed(range(steps)):
        if g_y is not None:
            ds = ds + g_y[k]
        weights_k, e_k = tape.attention[k], tape.e[k]
        d_weights = torch.bmm(tape.memory[k], ds.unsqueeze(2)).squeeze(2)
        d_logits = torch._softmax_backward_data(d_weights, weights_k, 1, weights_k.dtype)
        d_score.addmv_(e_k.view(-1, hidden).t(), d_logits.view(-1))
        # d(2 W_a s + 2 U_a m_i), written over e_k, which is not needed any more.
        d_pre = _sigmoid_backward.grad_input(d_logits.unsqueeze(2) * score_vector, e_k,
                                             grad_input=e_k)
        torch.sum(d_pre, dim=1, out=dz[k, :, gates:])
        grad_keys.add_(d_pre)
        grad_content.baddbmm_(weights_k.unsqueeze(2), ds.unsqueeze(1))
        # Undo the writes of step k: h_k leaves slot p with its gradient, the candidate
        # returns to p with the gradient it gathered at its target, which held nothing before.
        grad_p = ring[k % nu]
        dh = torch.addmm(ds + grad_p[:, :hidden], grad_p[:, hidden:2 * hidden], key)
        target = (rows, tape.targets[k])
        grad_p.copy_(grad[target])
        grad.index_put_(target, grad.new_zeros(()))
        dc = base.backward(k, dh, dc, dz[k, :, :gates])
        ds = torch.mm(dz[k], recurrent)
        if tape.reset_steps[k]:
            reset = tape.resets[k].view(batch, 1, 1)
            ds.masked_fill_(reset[:, 0], 0.0)
            grad.masked_fill_(reset, 0.0)
            if dc is not None:
                dc = dc.masked_fill(reset[:, 0], 0.0)

    s_prev = torch.cat([tape.s0.unsqueeze(0), y[:-1]]).masked_fill_(
        tape.resets.unsqueeze(2), 0.0)
    d_recurrent = dz.view(-1, dz.shape[2]).t() @ s_prev.view(-1, hidden)
    d_key = tape.e.view(-1, hidden).t() @ tape.memory.view(-1, hidden)  # e holds d_pre now
    d_incoming = torch.baddbmm(grad_content, grad_keys, key.expand(batch, -1, -1))
    d_score_in = grad[:, :slots, 2 * hidden]
    return (dz, d_recurrent, d_key, d_score, ds, dc, d_incoming[:, :nu], d_score_in[:, :nu],
            d_incoming[:, nu:], d_score_in[:, nu:])


class _Screened(torch.autograd.Function):
    """:func:`_screened_forward` and :func:`_screened_backward` as one autograd node per chunk."""

    @staticmethod
    def forward(ctx: FunctionCtx, lstm: bool, resets: Tensor, t0: Tensor, short_valid: Tensor,
                short_time: Tensor, relevant_valid: Tensor, relevant_time: Tensor, xp: Tensor,
                recurrent: Tensor, key: Tensor, score: Tensor, s0: Tensor, c0: Tensor | None,
                short: Tensor, short_score: Tensor, relevant: Tensor,
                relevant_score: Tensor) -> tuple[Any, ...]:
        result, tape = _screened_forward(
            xp, Weights(recurrent, key, score), s0, c0, short, short_score, short_valid,
            short_time, relevant, relevant_score, relevant_valid, relevant_time, t0, resets,
            lstm=lstm, save=True)
        ctx.tape = tape  # type: ignore[attr-defined]
        ctx.set_materialize_grads(False)
        outputs = _flatten(result)
        ctx.mark_non_differentiable(*outputs[len(_DIFFERENTIABLE):])
        if not (ctx.needs_input_grad[14] or ctx.needs_input_grad[16]):  # type: ignore[attr-defined]
            # The scores only carry the incoming scores' gradient (the attention is detached).
            ctx.mark_non_differentiable(result.short_score, result.relevant_score)
        return outputs

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, *grads: Tensor | None) -> tuple[Tensor | None, ...]:
        tape: _ScreenedTape = ctx.tape  # type: ignore[attr-defined]
        (dxp, d_recurrent, d_key, d_score, ds0, dc0, d_short, d_short_score, d_relevant,
         d_relevant_score) = _screened_backward(tape, *grads[:len(_DIFFERENTIABLE)])
        del ctx.tape  # type: ignore[attr-defined]
        return (None, None, None, None, None, None, None, dxp, d_recurrent, d_key, d_score, ds0,
                dc0, d_short, d_short_score, d_relevant, d_relevant_score)


_TRACES = ("attention", "slot_time", "relevant_valid", "relevant_score")


def _flatten(result: ScreenedResult) -> tuple[Any, ...]:
    """The differentiable outputs first (a ``None`` ``c`` stays ``None``), then the rest."""
    rest = (result.t, result.short_valid, result.short_time, result.relevant_valid,
            result.relevant_time, *(result.traces[key] for key in _TRACES))
    return (*(getattr(result, key) for key in _DIFFERENTIABLE), *rest)


def screened_scan(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor | None, short: Tensor,
                  short_score: Tensor, short_valid: Tensor, short_time: Tensor,
                  relevant: Tensor, relevant_score: Tensor, relevant_valid: Tensor,
                  relevant_time: Tensor, t0: Tensor, resets: Tensor) -> ScreenedResult:
    """Relevancy screening (ReLSTM with ``c0``, ReLRNN without) over one chunk.

    Equivalent to running the cell's step under :func:`rlmem.cells.base.scan`; see
    :class:`rlmem.cells.relevancy._RelevancyScreening` for the equations.

    Shapes:
        - xp: ``(T, B, G + H)``, the input terms of ``z`` (``G = 4H`` for the LSTM, ``H``)
        - s0, c0: ``(B, H)``; short ``(B, ν, H)``, oldest first; relevant ``(B, ρ, H)``;
          the scores, valid masks and times ``(B, ν)`` and ``(B, ρ)``; t0 ``(B,)`` long
        - resets: ``(T, B)`` bool
    """
    lstm = c0 is not None
    tensors = (xp, *weights, s0, c0, short, short_score, relevant, relevant_score)
    if not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)):
        return _screened_forward(xp, weights, s0, c0, short, short_score, short_valid,
                                 short_time, relevant, relevant_score, relevant_valid,
                                 relevant_time, t0, resets, lstm=lstm, save=False)[0]
    outputs = _Screened.apply(lstm, resets, t0, short_valid, short_time, relevant_valid,
                              relevant_time, xp, *weights, s0, c0, short, short_score, relevant,
                              relevant_score)
    differentiable = dict(zip(_DIFFERENTIABLE, outputs, strict=False))
    t, short_valid, short_time, relevant_valid, relevant_time, *traces = outputs[
        len(_DIFFERENTIABLE):]
    return ScreenedResult(**differentiable, t=t, short_valid=short_valid, short_time=short_time,
                          relevant_valid=relevant_valid, relevant_time=relevant_time,
                          traces=dict(zip(_TRACES, traces, strict=True)))

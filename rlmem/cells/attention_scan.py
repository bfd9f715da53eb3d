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

import math
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, TypeVar

import torch
from torch import Tensor, nn
from torch.autograd.function import FunctionCtx, once_differentiable

from rlmem.cells import extension
from rlmem.cells.base import reset_state, scan

_T = TypeVar("_T")
_R = TypeVar("_R")
_sigmoid_backward = torch.ops.aten.sigmoid_backward
_tanh_backward = torch.ops.aten.tanh_backward


class Weights(NamedTuple):
    r"""Weights as the engines use them, built by the cell under autograd on every call.

    ``z = [xp[t], 2 b_a] + s_{t-1} W^\top`` gives both the base pre-activation and the
    attention query in one matmul (``xp`` from the cell's ``project_input`` carries the base's
    input terms and bias). Every pre-activation that goes through a ``tanh`` is doubled so that
    the engine can use :math:`2\sigma(2x) - 1`: the ``g`` block of the LSTM (or the whole
    tanh-RNN pre-activation), the query, the keys and the score vector.
    """

    recurrent: Tensor
    """``(G + H, H)``: the base's recurrent weights (``G`` rows) over ``2 W_a``."""
    key: Tensor
    """``(H, H)``: ``2 U_a``."""
    score: Tensor
    """``(H,)``: ``2 v_a``."""
    query_bias: Tensor
    """``(H,)``: ``2 b_a``."""


def episode_time(t0: Tensor, resets: Tensor) -> Tensor:
    """``(T, B)`` long: steps since the episode started at each step, before that step.

    Step ``k`` of item ``b`` is ``k - r`` after its last reset ``r ≤ k``, else ``t0[b] + k``.
    """
    steps = resets.shape[0]
    index = torch.arange(steps, device=resets.device).unsqueeze(1)
    last = torch.where(resets, index, -1).cummax(dim=0).values
    return torch.where(last >= 0, index - last, t0.unsqueeze(0) + index)


def project(x: Tensor, weight_t: Tensor, bias: Tensor) -> Tensor:
    """``x W^T + b`` over all ``T × B`` inputs in one matmul.

    ``weight_t`` is ``W^T``, contiguous: autograd then forms the weight's gradient as
    ``x^T @ grad``, many times faster than ``grad^T @ x`` when the input is narrow (copy's 10
    symbols).

    Shapes: x ``(T, B, I)``; weight_t ``(I, G)``; bias ``(G,)``; returns ``(T, B, G)``.
    """
    steps, batch, features = x.shape
    return torch.addmm(bias, x.reshape(-1, features), weight_t).view(steps, batch, -1)


STEP_PATH_STEPS = 4
"""Without autograd, chunks shorter than this (the rollout's single steps) run the cell's own
step through :func:`rlmem.cells.base.scan`: an engine's setup costs more than it saves there."""


def outside_autocast(scan_fn: Callable[[Tensor, Any, Tensor], _R], x: Tensor, state: Any,
                     resets: Tensor, dtype: torch.dtype) -> _R | None:
    """Run ``scan_fn`` in ``dtype`` with autocast off, if autocast is on; else None.

    The engines are bound by the number of their ops, not by their precision, so under
    autocast they run in the parameters' dtype instead (their output is in that dtype).
    """
    if not torch.is_autocast_enabled(x.device.type):
        return None
    state = type(state)(*(value.to(dtype) if value.is_floating_point() else value
                          for value in state))
    with torch.autocast(x.device.type, enabled=False):
        return scan_fn(x.to(dtype), state, resets)


def wants_engine(steps: int, tensors: Iterable[Tensor | None]) -> bool:
    """Whether a chunk of ``steps`` steps over ``tensors`` should run through an engine."""
    return steps >= STEP_PATH_STEPS or (
        torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors))


def short_scan(step: Callable[[Tensor, Any], tuple[Tensor, Any, dict[str, Tensor]]],
               xp: Tensor, state: Any, resets: Tensor) -> tuple[Tensor, Any, dict[str, Tensor]]:
    """:func:`rlmem.cells.base.scan` for the few steps of a rollout: a single step is run
    directly, its outputs given a time dimension by views rather than stacked copies."""
    if xp.shape[0] != 1:
        return scan(step, xp, state, resets)
    if bool(resets.any()):
        state = reset_state(state, resets[0])
    y, state, traces = step(xp[0], state)
    return y.unsqueeze(0), state, {key: value.unsqueeze(0) for key, value in traces.items()}


_PREPARED: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[Any, ...], Any]] = \
    weakref.WeakKeyDictionary()


def prepared(module: nn.Module, build: Callable[[], _T]) -> _T:
    """``build()``: weights derived from ``module``'s parameters (doubled, concatenated).

    Without autograd they are kept and reused until a parameter changes (a new tensor, or an
    in-place update such as an optimizer step): a rollout step would otherwise spend more on
    rebuilding them than on the step. Under autograd they are rebuilt every call, so that
    gradients reach the parameters.
    """
    parameters = list(module.parameters())
    if torch.is_grad_enabled() and any(p.requires_grad for p in parameters):
        return build()
    # Tensors made in inference mode cannot enter an autograd graph later: keyed by the mode.
    key = (torch.is_inference_mode_enabled(),
           *((p.data_ptr(), p._version, p.dtype, p.device) for p in parameters))
    hit = _PREPARED.get(module)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    _PREPARED[module] = (key, value)
    return value


# --- scratch memory ---------------------------------------------------------------------------


class Workspace:
    """Scratch memory of the engines, recycled across calls (CPU only).

    A fresh large CPU allocation is mapped lazily, so the first write to each of its 4 KB pages
    faults into the kernel; on the per-step slices of a chunk's buffers that costs as much as
    the step's arithmetic. The engines therefore carve their internal buffers out of blocks
    taken from here, and give the blocks back once the chunk's backward has run (or at once
    without one). Outputs never alias a block. CUDA has its own caching allocator: there a
    block is a plain allocation.
    """

    SMALL = 1 << 16
    """Blocks below this many bytes are plain allocations: the allocator recycles those."""

    def __init__(self, limit: int = 1 << 30) -> None:
        self.limit = limit
        """Bytes of free blocks kept at most."""
        self._free: list[Tensor] = []
        self._held: list[tuple[Tensor, int]] = []
        self._lock = threading.Lock()

    def take(self, numel: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """A 1-D block of at least ``numel`` elements, of undefined content."""
        if device.type != "cpu" or numel * dtype.itemsize < self.SMALL:
            return torch.empty(numel, dtype=dtype, device=device)
        with self._lock:
            fits = [(block.numel(), index) for index, block in enumerate(self._free)
                    if block.dtype == dtype and numel <= block.numel() <= 2 * numel]
            if fits:
                return self._free.pop(min(fits)[1])
        return torch.empty(numel, dtype=dtype, device=device)

    HELD = 8
    """Blocks of :meth:`take_unshared` kept at most."""

    def take_unshared(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
                      use_count: Callable[[Tensor], int], rows: int | None = None) -> Tensor:
        """A tensor of ``shape`` for an output that outlives the call (a rollout state's
        memory): a view of a block kept here, reused once nothing else shares the block's
        storage (``use_count(block) == 1``, the compiled ``storage_use_count``). A state
        dropped by its caller so gives its pages to the next step's, instead of each step
        faulting in fresh ones.

        Its content is undefined, except with ``rows``: then ``[:, rows:]`` holds zeros, and the
        caller promises to write only ``[:, :rows]``. Each block remembers how far along dim 1
        it may hold non-zeros, so a rollout whose episodes grow a slot per step clears nothing
        and copies only the slots in use (MemLSTM's memory, whose empty slots are zero).
        """
        if device.type != "cpu":
            return torch.zeros(shape, dtype=dtype, device=device)
        inference = torch.is_inference_mode_enabled()  # such blocks stay in inference mode
        width = shape[1] if len(shape) > 1 else 1
        with self._lock:
            index = next((index for index, (block, _) in enumerate(self._held)
                          if block.shape == shape and block.dtype == dtype
                          and block.is_inference() == inference and use_count(block) == 1),
                         None)
            if index is None:  # zeros: a fresh block may hold non-zeros nowhere
                self._held.append((torch.zeros(shape, dtype=dtype, device=device), 0))
                if len(self._held) > self.HELD:
                    self._held.pop(0)
                index = len(self._held) - 1
            block, dirty = self._held[index]
            keep = width if rows is None else rows
            if keep < dirty:
                block[:, keep:dirty].zero_()
            self._held[index] = (block, keep)
            return block.view(shape)

    def give(self, *blocks: Tensor) -> None:
        """Return blocks from :meth:`take`; nothing may use them afterwards."""
        with self._lock:
            for block in blocks:
                if block.device.type == "cpu" and block.nbytes >= self.SMALL:
                    self._free.append(block)
            while sum(block.nbytes for block in self._free) > self.limit:
                self._free.pop(0)


WORKSPACE = Workspace()
"""The engines' shared :class:`Workspace`."""

_ALIGN = 16
"""Carved buffers start on multiples of this many elements (64 bytes in float32)."""


def _carve(shapes: dict[str, tuple[int, ...]], dtype: torch.dtype,
           device: torch.device) -> tuple[Tensor, dict[str, Tensor]]:
    """One :data:`WORKSPACE` block holding a buffer of each shape, and the buffers."""
    sizes = {name: math.prod(shape) for name, shape in shapes.items()}
    total = sum(-(-size // _ALIGN) * _ALIGN for size in sizes.values())
    block = WORKSPACE.take(total, dtype, device)
    buffers, offset = {}, 0
    for name, shape in shapes.items():
        buffers[name] = block[offset:offset + sizes[name]].view(shape)
        offset += -(-sizes[name] // _ALIGN) * _ALIGN
    return block, buffers


# --- the base recurrences ---------------------------------------------------------------------


class _Base:
    """One base recurrence (LSTM or tanh-RNN): forward into preallocated buffers, backward.

    ``z`` is the pre-activation block of the base (``4H`` for the LSTM, ``H`` for the RNN), with
    every tanh pre-activation doubled (see :class:`Weights`): ``g = 2σ(z_g) - 1``. Views of
    every row are made once: on CPU a view costs as much as a small op.
    """

    def __init__(self, lstm: bool, steps: int, hidden: int, c0: Tensor | None, save: bool,
                 buffers: dict[str, Tensor], views: bool = True) -> None:
        self.lstm = lstm
        self.save = save
        self.steps = steps
        self.gates = 4 * hidden if lstm else hidden
        self.minus_one = buffers["minus_one"].fill_(-1.0)
        constants = buffers["constants"]
        constants[0], constants[1] = 2.0, 0.5
        self.two, self.half = constants[0], constants[1]
        if not lstm:
            return
        assert c0 is not None
        # act[k] = [i, f, σ(z_g), o]; partner[k] = [g, c_{k-1}, 2i, tanh(c_k)], what each gate
        # is multiplied by in the backward. c_k is written as partner[k + 1]'s c_{k-1}; without
        # saving, two rows take turns.
        self.act, self.partner = buffers["act"], buffers["partner"]
        self.partner[0, :, 1] = c0
        if not views:  # the compiled loops make their own
            return
        act_rows, partner_rows = self.act.unbind(0), self.partner.unbind(0)
        gates = [self.act[:, :, gate].unbind(0) for gate in range(4)]
        parts = [self.partner[:, :, part].unbind(0) for part in range(4)]
        self.c_rows = parts[1]
        # Per step, every view its forward and backward use (without saving, two rows of
        # partner alternate and one row of act is reused).
        rows = range(steps) if save else range(2)
        act_at = [0 if not save else k for k in rows]
        self.forward_views = [
            (act_rows[a], gates[0][a], gates[1][a], gates[2][a], gates[3][a], parts[0][k],
             parts[1][k], parts[2][k], parts[3][k], parts[1][k + 1 if save else 1 - k])
            for k, a in zip(rows, act_at, strict=True)]
        if save:
            self.backward_views = [
                (act_rows[k], gates[1][k], gates[3][k], partner_rows[k][:, :3], parts[3][k])
                for k in range(steps)]

    @staticmethod
    def shapes(lstm: bool, steps: int, batch: int, hidden: int,
               save: bool) -> dict[str, tuple[int, ...]]:
        """The buffers the constructor takes."""
        shapes: dict[str, tuple[int, ...]] = {"minus_one": (batch, hidden), "constants": (2,)}
        if lstm:
            shapes["act"] = (steps if save else 1, batch, 4, hidden)
            shapes["partner"] = (steps + 1 if save else 2, batch, 4, hidden)
        return shapes

    def _row(self, k: int) -> int:
        return k if self.save else k % 2

    def reset(self, k: int, reset: Tensor) -> None:
        """Zero ``c_{k-1}`` of the batch items that reset at step ``k``."""
        if self.lstm:
            self.c_rows[self._row(k)].masked_fill_(reset.unsqueeze(1), 0.0)

    def forward(self, k: int, z: Tensor, h: Tensor) -> Tensor:
        """Write ``h_k`` into ``h``, from the base block of ``z`` (``(B, 4, H)`` for the LSTM)."""
        minus_one, two = self.minus_one, self.two
        if not self.lstm:
            torch.sigmoid(z, out=h)
            return torch.add(minus_one, h, alpha=2.0, out=h)
        act, i, f, g_sigmoid, o, g, c_prev, i_twice, tanh_c, c = self.forward_views[
            k if self.save else k % 2]
        torch.sigmoid(z, out=act)
        torch.add(minus_one, g_sigmoid, alpha=2.0, out=g)
        torch.mul(i, two, out=i_twice)
        torch.mul(f, c_prev, out=c).addcmul_(i, g)
        torch.sigmoid(torch.mul(c, two), out=tanh_c)
        torch.add(minus_one, tanh_c, alpha=2.0, out=tanh_c)
        return torch.mul(o, tanh_c, out=h)

    def final_c(self) -> Tensor:
        return self.partner[self._row(self.steps), :, 1].clone()

    def backward(self, k: int, h: Tensor, dh: Tensor, dc: Tensor | None, dz: Tensor,
                 d_act: Tensor, d_act_parts: tuple[Tensor, Tensor],
                 dc_out: Tensor) -> Tensor | None:
        """Write the gradient of the base block of ``z`` into ``dz``; return that of
        ``c_{k-1}``. ``h`` is ``h_k`` (the RNN's backward reads it); ``d_act`` is scratch of
        the shape of an ``act`` row, ``d_act_parts`` its first three gates and its last, and
        ``dc_out`` ``(B, 1, H)`` scratch, not ``dc``'s, for the result."""
        if not self.lstm:
            # z is the doubled pre-activation: d tanh(z / 2) / dz = (1 - h²) / 2.
            _tanh_backward.grad_input(dh, h, grad_input=dz).mul_(self.half)
            return None
        act, f, o, partner_three, tanh_c = self.backward_views[k]
        dc_k = _tanh_backward.grad_input(dh * o, tanh_c, grad_input=dc_out.squeeze(1))
        if dc is not None:
            dc_k.add_(dc)
        torch.mul(partner_three, dc_out, out=d_act_parts[0])
        torch.mul(tanh_c, dh, out=d_act_parts[1])
        _sigmoid_backward.grad_input(d_act, act, grad_input=dz)
        return dc_k.mul_(f)


def _state_gradient(dz: Tensor, recurrent: Tensor, g_previous: Tensor | None,
                    reset: Tensor | None) -> Tensor:
    """The gradient of ``s_{k-1}`` in a backward loop: the recurrent weights carry ``dz_k``
    back (nothing crosses a reset, ``reset`` ``(B, 1)``), plus ``y_{k-1}``'s own gradient."""
    if reset is not None:
        ds = torch.mm(dz, recurrent).masked_fill_(reset, 0.0)
        return ds.add_(g_previous) if g_previous is not None else ds
    if g_previous is not None:
        return torch.addmm(g_previous, dz, recurrent)
    return torch.mm(dz, recurrent)


def _previous_states(out: Tensor, s0: Tensor, y: Tensor, resets: Tensor) -> Tensor:
    """``s_{k-1}`` as step ``k`` read it (zero after a reset), for the recurrent weights'
    gradient. Shapes: out, y ``(T, B, H)``; s0 ``(B, H)``; resets ``(T, B)``."""
    out[0] = s0
    out[1:] = y[:-1]
    return out.masked_fill_(resets.unsqueeze(2), 0.0)


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
    slot_data: Tensor  # the forward's slots as they are after the last step
    e: Tensor  # (T, B, ν+ρ, H): σ(2 W_a s + 2 U_a m_i)
    targets: Tensor  # (T, B) long: the row (of the flattened slots) each candidate went to
    evicted: Tensor  # (T, B, width): what each candidate's target row held before
    before_reset: dict[int, Tensor]  # the slots before a reset emptied some of them
    incoming: Tensor  # (B, ν+ρ, H): S and R as they came in
    resets: Tensor
    reset_steps: list[bool]
    blocks: tuple[Tensor, ...]  # the WORKSPACE blocks the buffers above are carved from


_PAD = 16
"""Columns after ``[m, 2 U_a m]`` in a slot's row: score, mask (0, or -inf when the slot is
empty), rank (score + mask), episode step, then padding that keeps rows 64-byte aligned."""

UNIFORM_SHARE = 1.0
"""Normalised screening's relevance of a state that drew exactly its uniform share of
attention (see ``rlmem.cells.screening.Screening.normalised``), and the score an empty slot of
R ranks at under it: only a state above its share enters a free slot."""

TIME_LIMIT = {torch.float32: 2 ** 24, torch.float64: 2 ** 53}
"""Episode steps up to which a slot's step is exact in its float column, per dtype; the engine
takes only these dtypes."""


def chunk_flags(resets: Tensor, t0: Tensor, dtype: torch.dtype) -> tuple[list[bool], bool]:
    """Which steps reset some batch item, and whether the episode steps fit ``dtype`` exactly:
    one host sync per chunk, before its loop."""
    fits = (t0.max() + resets.shape[0] < TIME_LIMIT[dtype]).view(1)
    flags = torch.cat([resets.any(dim=1), fits]).tolist()
    return flags[:-1], flags[-1]


def _screened_loop(xp: Tensor, s0: Tensor, resets: Tensor, any_reset: list[bool], base: _Base,
                   weights: Weights, slot_data: Tensor, z_in: Tensor, z: Tensor,
                   entering: Tensor, e: Tensor, attention: Tensor, history: Tensor,
                   targets: Tensor, evicted: Tensor | None, candidate: Tensor, y: Tensor,
                   nu: int, normalised: bool, save: bool) -> dict[int, Tensor]:
    """The forward loop of :func:`_screened_forward` in Python, over its buffers (the compiled
    ``screened_forward`` is the same loop). Returns the slots as they were before each step
    that resets some item, when saving."""
    steps, batch, hidden = y.shape
    slots = attention.shape[2]
    scratch, gates, wide, width = slots, base.gates, 2 * hidden, slot_data.shape[2]
    recurrent_t, key_t, score_vector = weights.recurrent.t(), weights.key.t(), weights.score
    device = xp.device
    minus_inf = float("-inf")
    rows_of_slots = slot_data.view(-1, width)
    content, keys = slot_data[..., :hidden], slot_data[..., hidden:wide]
    mask, rank = slot_data[..., wide + 1], slot_data[..., wide + 2]
    before_reset: dict[int, Tensor] = {}
    z_base = z[:, :gates].view(batch, 4, hidden) if base.lstm else z[:, :gates]
    z_query = z[:, gates:].unsqueeze(1)
    z_in_base = z_in[:, :gates]
    # Views made once, as lists: indexing costs as much as a small op.
    content_all, keys_all, mask_all = content[:, :slots], keys[:, :slots], mask[:, :slots]
    score_rank_short = slot_data[:, :nu, wide:wide + 3:2]  # score and rank accumulate alike
    rank_relevant, meta_all = rank[:, nu:slots], slot_data[:, :slots, wide:wide + 4]
    first_row = torch.arange(batch, device=device) * (slots + 1)
    relevant_rows, scratch_rows = first_row + nu, first_row + scratch
    ring = [(first_row + p, slot_data[:, p, wide:wide + 4], rank[:, p], content[:, p],
             slot_data[:, p:p + 1, :hidden], keys[:, p]) for p in range(min(nu, steps))]
    xp_steps, y_steps, e_steps = xp.unbind(0), y.unbind(0), e.unbind(0)
    y_rows, entering_steps = y.unsqueeze(2).unbind(0), entering.unbind(0)
    target_steps, history_steps = targets.unbind(0), history.unbind(0)
    attention_steps, attention_rows = attention.unbind(0), attention.unsqueeze(2).unbind(0)
    attention_short = attention[:, :, :nu].unsqueeze(3).unbind(0)
    evicted_steps = evicted.unbind(0) if evicted is not None else None
    addmm, where, index_select, mm, add = torch.addmm, torch.where, torch.index_select, \
        torch.mm, torch.add
    softmax, baddbmm, matmul = torch._softmax, torch.baddbmm, torch.matmul
    s = s0
    for k in range(steps):
        rows_p, meta_p, rank_p, content_p, content_row_p, keys_p = ring[k % nu]
        if any_reset[k]:
            reset = resets[k].view(batch, 1, 1)
            s = s.masked_fill(reset[:, 0], 0.0)
            base.reset(k, reset[:, 0, 0])
            if save:
                before_reset[k] = slot_data.clone()
            slot_data.masked_fill_(reset, 0.0)
            mask.masked_fill_(reset[:, 0], minus_inf)
            rank.masked_fill_(reset[:, 0], minus_inf)
            if normalised:
                rank_relevant.masked_fill_(reset[:, 0], UNIFORM_SHARE)
        z_in_base.copy_(xp_steps[k])
        addmm(z_in, s, recurrent_t, out=z)

        # h_{t-ν} leaves S from slot p and is screened into R (see relevancy.screen): a free
        # slot of R ranks -inf, so the first free slot, else the first lowest score, is the
        # target; an empty candidate (-inf) never enters.
        lowest, slot = rank_relevant.min(dim=1)
        target = where(rank_p > lowest, slot.add_(relevant_rows), scratch_rows,
                       out=target_steps[k])
        if evicted_steps is not None:  # the backward undoes the step's writes
            index_select(rows_of_slots, 0, target, out=evicted_steps[k])
        rows_of_slots.index_copy_(0, target, index_select(rows_of_slots, 0, rows_p,
                                                          out=candidate))
        # h_t enters S in the slot just vacated.
        h = base.forward(k, z_base, content_p)
        mm(h, key_t, out=keys_p)
        meta_p.copy_(entering_steps[k])

        e_k = add(keys_all, z_query, out=e_steps[k if save else 0]).sigmoid_()
        softmax(matmul(e_k, score_vector).add_(mask_all), 1, False, out=attention_steps[k])
        baddbmm(content_row_p, attention_rows[k], content_all, out=y_rows[k])
        s = y_steps[k]
        if normalised:  # each weight relative to the uniform share 1/|M_t|, over ν steps
            share = (mask_all == 0).sum(dim=1, keepdim=True).to(y.dtype).div_(nu)
            score_rank_short.add_(attention_short[k] * share.unsqueeze(2))
        else:
            score_rank_short.add_(attention_short[k])
        history_steps[k].copy_(meta_all)

    return before_reset


def _screened_forward(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor | None,
                      short: Tensor, short_score: Tensor, short_valid: Tensor,
                      short_time: Tensor, relevant: Tensor, relevant_score: Tensor,
                      relevant_valid: Tensor, relevant_time: Tensor, t0: Tensor,
                      resets: Tensor, any_reset: list[bool], *, lstm: bool, normalised: bool,
                      save: bool) -> tuple[ScreenedResult, _ScreenedTape | None]:
    steps, batch, _ = xp.shape
    hidden = s0.shape[1]
    nu, rho = short.shape[1], relevant.shape[1]
    slots = nu + rho
    scratch = slots
    gates = 4 * hidden if lstm else hidden
    wide, width = 2 * hidden, 2 * hidden + _PAD
    shapes = {
        "slot_data": (batch, slots + 1, width), "entering": (steps, batch, 4),
        "attention": (steps, batch, slots), "history": (steps, batch, slots, 4),
        "e": (steps if save else 1, batch, slots, hidden), "z": (batch, gates + hidden),
        "z_in": (batch, gates + hidden), "candidate": (batch, width),
        **_Base.shapes(lstm, steps, batch, hidden, save)}
    if save:
        shapes["evicted"] = (steps, batch, width)
    block, buffers = _carve(shapes, xp.dtype, xp.device)
    long_block, long_buffers = _carve({"targets": (steps, batch)}, torch.long, xp.device)
    native = extension.ops(xp)
    base = _Base(lstm, steps, hidden, c0, save, buffers, views=native is None)
    recurrent_t, key_t, score_vector = weights.recurrent.t(), weights.key.t(), weights.score
    device = xp.device
    minus_inf = float("-inf")

    # The memory, slot by slot: S as a ring buffer (at step k its oldest state sits in slot
    # k mod ν, where h_k then goes), then R, then a scratch slot that takes the write of a
    # candidate that does not enter R, so that no step branches per batch item. A slot's row
    # is [m_i, 2 U_a m_i, score, mask, rank, episode step, padding], so that a screening write
    # moves all of it at once. The mask is 0 on a slot that holds a state and -inf on an empty
    # one; the softmax adds it to the logits, and the screening compares ranks.
    slot_data = buffers["slot_data"].zero_()
    content, keys = slot_data[..., :hidden], slot_data[..., hidden:wide]
    score, mask, rank, slot_time = (slot_data[..., wide + column] for column in range(4))
    content[:, :nu] = short
    content[:, nu:slots] = relevant
    torch.matmul(content[:, :slots], key_t, out=keys[:, :slots])
    score[:, :nu] = short_score
    score[:, nu:slots] = relevant_score
    mask[:, :nu].masked_fill_(~short_valid, minus_inf)
    mask[:, nu:slots].masked_fill_(~relevant_valid, minus_inf)
    mask[:, scratch] = minus_inf
    torch.add(score, mask, out=rank)
    if normalised:
        rank[:, nu:slots].masked_fill_(~relevant_valid, UNIFORM_SHARE)
    slot_time[:, :nu] = short_time
    slot_time[:, nu:slots] = relevant_time
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
            lstm, normalised, UNIFORM_SHARE, save)
        before_reset = dict(zip((k for k in range(steps) if any_reset[k]), saved,
                                strict=False))
    else:
        before_reset = _screened_loop(
            xp, s0, resets, any_reset, base, weights, slot_data, z_in, z, entering, e,
            attention, history, targets, evicted, candidate, y, nu, normalised, save)

    # The state in its layout (S oldest first) and the traces, in the order [S oldest first, R].
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
    result = ScreenedResult(
        y=y, c=base.final_c() if lstm else None, t=time[-1] + 1,
        short=content[:, last], short_score=score[:, last], short_valid=valid[:, last],
        short_time=final_time[:, last],
        relevant=content[:, nu:slots].clone(), relevant_score=score[:, nu:slots].clone(),
        relevant_valid=valid[:, nu:slots], relevant_time=final_time[:, nu:slots],
        traces=traces)
    if not save:
        WORKSPACE.give(block, long_block)
        return result, None
    assert evicted is not None
    tape = _ScreenedTape(nu, base, weights, y, s0, attention, slot_data, e, targets, evicted,
                         before_reset, torch.cat([short, relevant], dim=1), resets, any_reset,
                         (block, long_block))
    return result, tape


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
    dc_buffers, zero = buffers["dc"].unbind(0), buffers["zero"].zero_()
    d_keys_h, d_logits = buffers["d_keys_h"], buffers["d_logits"]

    dz = buffers["dz"]
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
    softmax_backward = torch.ops.aten._softmax_backward_data.out
    sigmoid_backward, bmm, addmm = _sigmoid_backward.grad_input, torch.bmm, torch.addmm
    ds = g_y_steps[-1] if g_y_steps is not None else y.new_zeros(batch, hidden)
    dc = g_c
    for k in reversed(range(steps)):
        oldest = k % nu
        weights_k, ds_row = attention_steps[k], ds.unsqueeze(1)
        # (B, 1, H) @ (B, H, N): several times faster on CPU than (B, N, H) @ (B, H, 1)
        d_weights = bmm(ds_row, memory_columns).view(batch, slots)
        d_logits_k = softmax_backward(d_weights, weights_k, 1, weights_k.dtype,
                                      grad_input=d_logits_steps[k])
        # d(2 W_a s + 2 U_a m_i) = dlogit_i σ'(.) ⊙ 2 v_a: d_pre holds dlogit_i σ'(.), and
        # each use multiplies by 2 v_a (one pass fewer over the slots)
        sigmoid_backward(d_logits_k.unsqueeze(2), e_steps[k], grad_input=d_pre)
        torch.sum(d_pre, dim=1, out=dz_query[k]).mul_(score_vector)
        grad_keys.addcmul_(d_pre, score_vector)
        grad_content.addcmul_(attention_columns[k], ds_row)
        # Undo the writes of step k: h_k leaves slot p with its gradient; the candidate comes
        # back to p with the gradient it gathered at its target, which held nothing before.
        rows_p, grad_content_p, grad_keys_p = ring[oldest]
        dh = addmm(ds + grad_content_p, d_keys_steps[k].copy_(grad_keys_p), key)
        target = target_steps[k]
        rows_of_grad.index_copy_(0, rows_p, torch.index_select(rows_of_grad, 0, target,
                                                               out=grad_candidate))
        rows_of_grad.index_fill_(0, target, zero)
        h = h_steps[k].copy_(contents[oldest])
        # ... and the same for the slots themselves
        rows_of_slots.index_copy_(0, rows_p, torch.index_select(rows_of_slots, 0, target,
                                                                out=restored))
        rows_of_slots.index_copy_(0, target, evicted_steps[k])
        if k in tape.before_reset:
            slot_data.copy_(tape.before_reset[k])
        dc = base.backward(k, h, dh, dc, dz_base[k], d_act, d_act_parts, dc_buffers[k % 2])
        g_previous = g_y_steps[k - 1] if g_y_steps is not None and k > 0 else None
        if tape.reset_steps[k]:
            reset = tape.resets[k].view(batch, 1, 1)
            ds = _state_gradient(dz_steps[k], recurrent, g_previous, reset[:, 0])
            grad.masked_fill_(reset, 0.0)
            if dc is not None:
                dc = dc.masked_fill(reset[:, 0], 0.0)
        else:
            ds = _state_gradient(dz_steps[k], recurrent, g_previous, None)

    return ds, dc


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
    block, buffers = _carve({
        "grad": (batch, slots + 1, wide + 1), "grad_candidate": (batch, wide + 1),
        "d_keys_h": (steps, batch, hidden), "d_logits": (steps, batch, slots),
        "d_pre": (batch, slots, hidden), "d_act": (batch, 4, hidden),
        "dc": (2, batch, 1, hidden), "zero": (), "dz": (steps, batch, recurrent.shape[0]),
        "s_prev": (steps, batch, hidden), "h": (steps, batch, hidden),
        "restored": (batch, tape.slot_data.shape[2])}, y.dtype, y.device)
    # The gradient of what each slot holds, [m_i, 2 U_a m_i, score], laid out as the forward's
    # slots. Going back in time it follows the states as the forward moved them: undoing the
    # writes of step k hands h_k its gradient and gives the candidate back its own.
    grad = buffers["grad"].zero_()
    last = (steps + torch.arange(nu, device=y.device)) % nu
    if g_short is not None:
        grad[:, last, :hidden] = g_short
    if g_relevant is not None:
        grad[:, nu:slots, :hidden] = g_relevant
    if g_short_score is not None:
        grad[:, last, wide] = g_short_score
    if g_relevant_score is not None:
        grad[:, nu:slots, wide] = g_relevant_score
    grad_content, grad_keys = grad[:, :slots, :hidden], grad[:, :slots, hidden:wide]
    d_keys_h, d_logits, dz = buffers["d_keys_h"], buffers["d_logits"], buffers["dz"]
    native = extension.ops(y)
    if native is not None:
        empty = y.new_empty(0)
        ds, dc = native.screened_backward(
            g_y if g_y is not None else empty, g_c if g_c is not None else empty, tape.resets,
            recurrent, key, score_vector, tape.attention, tape.e, tape.targets, tape.evicted,
            [tape.before_reset[k] for k in sorted(tape.before_reset)], tape.slot_data, grad,
            dz, d_logits, d_keys_h, buffers["h"], buffers["dc"],
            base.act if base.lstm else empty, base.partner if base.lstm else empty, nu,
            base.lstm)
        dc = dc if dc.numel() else None
    else:
        ds, dc = _screened_backward_loop(tape, g_y, g_c, grad, buffers)
        dc = dc.clone() if dc is not None else None  # not a view of the block given back

    s_prev = _previous_states(buffers["s_prev"], tape.s0, y, tape.resets)
    d_recurrent = dz.view(-1, dz.shape[2]).t() @ s_prev.view(-1, hidden)
    # 2 U_a is applied once per state (h_k, or an incoming one), not once per read of it.
    d_key = torch.addmm(d_keys_h.view(-1, hidden).t() @ buffers["h"].view(-1, hidden),
                        grad_keys.reshape(-1, hidden).t(), tape.incoming.view(-1, hidden))
    d_incoming = torch.baddbmm(grad_content, grad_keys, key.expand(batch, -1, -1))
    d_score_in = grad[:, :slots, wide].clone()
    # d(2 v_a) = Σ dlogit_i e_i, as (1, N) @ (N, H) products over every step and batch item
    d_score = torch.bmm(d_logits.view(-1, 1, slots),
                        tape.e.view(-1, slots, hidden)).sum(dim=(0, 1))
    d_xp, d_query_bias = dz[:, :, :gates].contiguous(), dz[:, :, gates:].sum(dim=(0, 1))
    WORKSPACE.give(block, *tape.blocks)
    return (d_xp, d_recurrent, d_key, d_score, d_query_bias, ds, dc, d_incoming[:, :nu],
            d_score_in[:, :nu], d_incoming[:, nu:], d_score_in[:, nu:])


class _Screened(torch.autograd.Function):
    """:func:`_screened_forward` and :func:`_screened_backward` as one autograd node per chunk."""

    @staticmethod
    def forward(ctx: FunctionCtx, any_reset: list[bool], normalised: bool, resets: Tensor,
                t0: Tensor, short_valid: Tensor, short_time: Tensor, relevant_valid: Tensor,
                relevant_time: Tensor, xp: Tensor, recurrent: Tensor, key: Tensor,
                score: Tensor, query_bias: Tensor, s0: Tensor, c0: Tensor | None,
                short: Tensor, short_score: Tensor, relevant: Tensor,
                relevant_score: Tensor) -> tuple[Any, ...]:
        result, tape = _screened_forward(
            xp, Weights(recurrent, key, score, query_bias), s0, c0, short, short_score,
            short_valid,
            short_time, relevant, relevant_score, relevant_valid, relevant_time, t0, resets,
            any_reset, lstm=c0 is not None, normalised=normalised, save=True)
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
                  normalised: bool = False) -> ScreenedResult | None:
    """Relevancy screening (ReLSTM with ``c0``, ReLRNN without) over one chunk.

    Equivalent to running the cell's step under :func:`rlmem.cells.base.scan`; see
    :class:`rlmem.cells.screening.RelevancyScreening` for the equations. ``normalised``
    screens as ``Screening.normalised`` does (each attention weight counted relative to the
    uniform share of its step, and a free slot of R ranked at :data:`UNIFORM_SHARE`), else as
    Algorithm 1. Returns ``None``
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
    if not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)):
        return _screened_forward(xp, weights, s0, c0, short, short_score, short_valid,
                                 short_time, relevant, relevant_score, relevant_valid,
                                 relevant_time, t0, resets, any_reset, lstm=c0 is not None,
                                 normalised=normalised, save=False)[0]
    outputs = _Screened.apply(any_reset, normalised, resets, t0, short_valid, short_time,
                              relevant_valid, relevant_time, xp, *weights, s0, c0, short,
                              short_score, relevant, relevant_score)
    differentiable = dict(zip(_DIFFERENTIABLE, outputs, strict=False))
    t, short_valid, short_time, relevant_valid, relevant_time, *traces = outputs[
        len(_DIFFERENTIABLE):]
    return ScreenedResult(**differentiable, t=t, short_valid=short_valid, short_time=short_time,
                          relevant_valid=relevant_valid, relevant_time=relevant_time,
                          traces=dict(zip(_TRACES, traces, strict=True)))


# --- full attention (MemLSTM) -----------------------------------------------------------------


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

    base: _Base
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
    e_block: Tensor  # the buffers behind e and attention, for the compiled backward
    w_block: Tensor


def full_flags(resets: Tensor, t0: Tensor, capacity: int) -> tuple[list[bool], int]:
    """Which steps reset some batch item, and how many incoming slots any item holds: one host
    sync per chunk, before its loop."""
    flags = torch.cat([resets.any(dim=1).long(), t0.max().clamp(max=capacity).view(1)]).tolist()
    return [bool(flag) for flag in flags[:-1]], int(flags[-1])


def _full_loop(xp: Tensor, s0: Tensor, resets: Tensor, any_reset: list[bool], base: _Base,
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
            s = s.masked_fill(reset, 0.0)
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


def _full_forward(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor, memory: Tensor,
                  keys: Tensor, valid: Tensor, t0: Tensor, resets: Tensor,
                  any_reset: list[bool], n_in: int, *,
                  save: bool) -> tuple[FullResult, _FullTape | None]:
    steps, batch, _ = xp.shape
    hidden, capacity = s0.shape[1], memory.shape[1]
    device = xp.device
    gates = 4 * hidden
    # Entries of the chunk, as columns of the per-step attention: the first n_in incoming
    # slots (slot order), then h_0..h_{T-1}. Until the
    # chunk has written capacity states, a step reads the incoming slots and h_0..h_k; from
    # then on every incoming slot has been overwritten and it reads its last capacity states.
    windows = []
    for k in range(steps):
        first = max(0, k + 1 - capacity)
        windows.append((n_in if first == 0 else 0, first, k + 1))
    widths = [incoming + end - first for incoming, first, end in windows]
    columns = n_in + steps
    shapes = {"chunk": (batch, steps, hidden), "chunk_keys": (batch, steps, hidden),
              "e": (sum(widths) * batch * hidden if save else max(widths) * batch * hidden,),
              "w": (sum(widths) * batch,),
              "weights_full": (steps, batch, columns), "mask": (steps, batch, n_in + steps),
              "z": (batch, gates + hidden), "z_in": (batch, gates + hidden),
              **_Base.shapes(True, steps, batch, hidden, save)}
    block, buffers = _carve(shapes, xp.dtype, device)
    base = _Base(True, steps, hidden, c0, save, buffers, views=extension.ops(xp) is None)
    recurrent_t, score_vector = weights.recurrent.t(), weights.score
    key = weights.key * 0.5  # U_a itself: MemLSTM's state keeps U_a h (exact, a power of 2)
    key_t = key.t()
    chunk, chunk_keys = buffers["chunk"], buffers["chunk_keys"]
    weights_full = buffers["weights_full"].zero_()
    z, z_in = buffers["z"], buffers["z_in"]
    z_in[:, gates:] = weights.query_bias  # z's input terms: the step's xp, the query bias

    # Which entries each step may attend to, as a mask added to its logits (0 or -inf): an
    # entry is a state of the step's episode at most capacity - 1 steps older than the step.
    time = episode_time(t0, resets)  # (T, B)
    segment = resets.long().cumsum(dim=0)  # episodes started inside the chunk, so far
    columns_in = torch.arange(n_in, device=device)
    slot_step = t0.unsqueeze(1) - 1 - torch.remainder(t0.unsqueeze(1) - 1 - columns_in, capacity)
    incoming_ok = (valid[:, :n_in].unsqueeze(0) & (segment == 0).unsqueeze(2)
                   & (time.unsqueeze(2) - slot_step.unsqueeze(0) < capacity))
    entry = torch.arange(steps, device=device)
    age = entry.view(steps, 1, 1) - entry.view(1, 1, steps)  # step k minus entry k'
    chunk_ok = ((age >= 0) & (age < capacity)
                & (segment.unsqueeze(2) == segment.t().unsqueeze(0)))
    mask = buffers["mask"]
    mask[..., :n_in] = 0.0
    mask[..., :n_in].masked_fill_(~incoming_ok, float("-inf"))
    mask[..., n_in:] = 0.0
    mask[..., n_in:].masked_fill_(~chunk_ok, float("-inf"))

    y = xp.new_empty(steps, batch, hidden)
    native = extension.ops(xp)
    e_steps: list[Tensor] = []
    w_steps: list[Tensor] = []
    if native is not None:
        native.full_forward(xp, s0, resets, recurrent_t, key_t, score_vector,
                            memory.contiguous(), keys.contiguous(), chunk, chunk_keys, z_in, z,
                            mask, weights_full, y, buffers["e"], buffers["w"], buffers["act"],
                            buffers["partner"], buffers["minus_one"], n_in, save)
    else:
        e_steps, w_steps = _full_loop(xp, s0, resets, any_reset, base, weights, memory, keys,
                                      chunk, chunk_keys, z_in, z, mask, weights_full, y,
                                      buffers["e"], buffers["w"], windows, save)

    # The final state: slot j holds the episode's latest step ≡ j (mod capacity).
    had_reset = resets.any(dim=0)
    last_reset = torch.where(resets, entry.unsqueeze(1), -1).max(dim=0).values
    in_segment = steps - last_reset.clamp(min=0)  # the chunk's steps of the last episode
    t_final = time[-1] + 1
    slots = torch.arange(capacity, device=device)
    final_age = torch.remainder(t_final.unsqueeze(1) - 1 - slots, capacity)
    from_chunk = final_age < in_segment.unsqueeze(1)
    keep_incoming = (~from_chunk & ~had_reset.unsqueeze(1)).unsqueeze(2)
    survives = (entry.unsqueeze(0) >= steps - in_segment.unsqueeze(1)) & (
        entry.unsqueeze(0) > steps - 1 - capacity)
    rows_of_batch = torch.arange(batch, device=device).unsqueeze(1) * capacity
    survivor_rows = torch.where(survives, rows_of_batch + torch.remainder(time.t(), capacity),
                                batch * capacity).view(-1)
    final_memory = _final_slots(memory, keep_incoming, chunk, survivor_rows)
    final_keys = _final_slots(keys, keep_incoming, chunk_keys, survivor_rows)
    final_valid = torch.zeros(batch * capacity + 1, dtype=torch.bool, device=device)
    final_valid[:-1] = (valid & keep_incoming.squeeze(2)).view(-1)
    final_valid.index_fill_(0, survivor_rows, True)

    # Traces in slot order. Each entry sits in one slot (an incoming slot in its own, h_k in
    # slot t_k mod capacity) and an invalid entry has weight 0, so summing the weights into
    # slots gives each slot its state's weight. At step k slot j holds the episode step
    # t_k - ((t_k - j) mod capacity) if the chunk wrote it in this episode, else incoming j.
    if native is not None:
        episode_start = torch.where(resets, entry.unsqueeze(1), -1).cummax(dim=0).values
        attention, slot_time = native.full_traces(weights_full, time, episode_start, valid,
                                                  n_in, capacity)
    else:
        attention, slot_time = _full_traces(weights_full, time, resets, valid, n_in, capacity)
    traces = {"attention": attention, "slot_time": slot_time}
    result = FullResult(y=y, c=base.final_c(), memory=final_memory, keys=final_keys,
                        t=t_final, valid=final_valid[:-1].view(batch, capacity), traces=traces)
    if not save:
        WORKSPACE.give(block)
        return result, None
    tape = _FullTape(base, weights, y, s0, memory, chunk, chunk_keys, e_steps, w_steps,
                     windows, keep_incoming, survivor_rows, resets, any_reset, (block,),
                     native, buffers["e"], buffers["w"])
    return result, tape


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
    trace_block, trace_buffers = _carve({"age": (steps, batch, capacity)}, torch.long, device)
    flag_block, flag_buffers = _carve({"chunk": (steps, batch, capacity),
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


def _final_slots(incoming: Tensor, keep: Tensor, chunk: Tensor, rows: Tensor) -> Tensor:
    """The incoming slots that are kept, overwritten by the chunk's surviving entries.

    Shapes: incoming ``(B, capacity, H)``; keep ``(B, capacity, 1)`` bool; chunk ``(B, T, H)``;
    rows ``(B * T,)``, each entry's flat row, ``B * capacity`` (a dump row) if it is gone.
    """
    batch, capacity, hidden = incoming.shape
    out = incoming.new_empty(batch * capacity + 1, hidden)
    torch.where(keep, incoming, incoming.new_zeros(()), out=out[:-1].view(batch, capacity, hidden))
    out.index_copy_(0, rows, chunk.reshape(-1, hidden))
    return out[:-1].view(batch, capacity, hidden)


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
        ds = _state_gradient(dz_steps[k], recurrent, g_previous, reset)
        if dc is not None and reset is not None:
            dc = dc.masked_fill(reset, 0.0)

    return ds, dc


def _full_backward(tape: _FullTape, g_y: Tensor | None, g_c: Tensor | None,
                   g_memory: Tensor | None, g_keys: Tensor | None
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None,
                              Tensor, Tensor]:
    """Gradients of ``xp``, the four weights, ``s0``, ``c0``, ``memory`` and ``keys``."""
    base, weights, y, chunk = tape.base, tape.weights, tape.y, tape.chunk
    steps, batch, hidden = y.shape
    capacity = tape.memory.shape[1]
    n_in = tape.windows[0][0]
    gates = base.gates
    recurrent, score_vector = weights.recurrent, weights.score
    key = weights.key * 0.5
    widest = max(incoming + end - first for incoming, first, end in tape.windows)
    block, buffers = _carve({
        "d_chunk": (batch, steps, hidden), "d_chunk_keys": (batch, steps, hidden),
        "d_logits": (batch * widest,), "d_pre": (batch * widest * hidden,),
        "d_act": (batch, 4, hidden), "dc": (2, batch, 1, hidden),
        "dz": (steps, batch, recurrent.shape[0]), "s_prev": (steps, batch, hidden)},
        y.dtype, y.device)
    d_chunk, d_chunk_keys = buffers["d_chunk"].zero_(), buffers["d_chunk_keys"].zero_()
    keep = tape.keep_incoming
    zero = y.new_zeros(())
    # The final state's gradient: kept incoming slots pass it to the incoming state, the
    # surviving entries of the chunk to their states.
    d_memory = (torch.where(keep, g_memory, zero) if g_memory is not None
                else y.new_zeros(batch, capacity, hidden))
    d_keys = (torch.where(keep, g_keys, zero) if g_keys is not None
              else y.new_zeros(batch, capacity, hidden))
    for grad, into in ((g_memory, d_chunk), (g_keys, d_chunk_keys)):
        if grad is not None:
            rows = torch.cat([grad.reshape(-1, hidden), grad.new_zeros(1, hidden)])
            torch.index_select(rows, 0, tape.survivor_rows, out=into.view(-1, hidden))
    dz = buffers["dz"]
    d_score_rows = y.new_zeros(batch, 1, hidden)  # Σ dlogit_i e_i per batch item
    if tape.native is not None:
        empty = y.new_empty(0)
        ds, dc = tape.native.full_backward(
            g_y if g_y is not None else empty, g_c if g_c is not None else empty, tape.resets,
            recurrent, key, score_vector, tape.memory.contiguous(), chunk, tape.e_block,
            tape.w_block, n_in, d_chunk, d_chunk_keys, d_memory, d_keys, d_score_rows, dz,
            buffers["d_logits"], buffers["dc"], base.act, base.partner)
        dc = dc if dc.numel() else None
    else:
        ds, dc = _full_backward_loop(tape, g_y, g_c, d_chunk, d_chunk_keys, d_memory, d_keys,
                                     d_score_rows, buffers)

    s_prev = _previous_states(buffers["s_prev"], tape.s0, y, tape.resets)
    d_recurrent = dz.view(-1, dz.shape[2]).t() @ s_prev.view(-1, hidden)
    # The chunk's keys are U_a h = (2 U_a / 2) h; incoming keys do not depend on U_a.
    d_key = (d_chunk_keys.view(-1, hidden).t() @ chunk.view(-1, hidden)).mul_(0.5)
    d_xp, d_query_bias = dz[:, :, :gates].contiguous(), dz[:, :, gates:].sum(dim=(0, 1))
    dc = dc.clone() if dc is not None else None  # not a view of the block given back below
    WORKSPACE.give(block, *tape.blocks)
    return (d_xp, d_recurrent, d_key, d_score_rows.sum(dim=(0, 1)), d_query_bias, ds, dc,
            d_memory, d_keys)


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
        return (None, None, None, None, None,
                *_full_backward(tape, *grads[:len(_FULL_DIFFERENTIABLE)]))


def full_scan(xp: Tensor, weights: Weights, s0: Tensor, c0: Tensor, memory: Tensor,
              keys: Tensor, valid: Tensor, t0: Tensor, resets: Tensor) -> FullResult | None:
    """Full attention over every past state of the episode (MemLSTM) over one chunk.

    Equivalent to running the cell's step under :func:`rlmem.cells.base.scan`; see
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
    if not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors)):
        return _full_forward(xp, weights, s0, c0, memory, keys, valid, t0, resets, any_reset,
                             n_in, save=False)[0]
    y, c, memory, keys, t, valid, *traces = _Full.apply(
        any_reset, n_in, resets, t0, valid, xp, *weights, s0, c0, memory, keys)
    return FullResult(y=y, c=c, memory=memory, keys=keys, t=t, valid=valid,
                      traces=dict(zip(_FULL_TRACES, traces, strict=True)))


class _FullFields(NamedTuple):
    """MemLSTM's state fields, for :func:`rlmem.cells.base.reset_state`."""

    s: Tensor
    c: Tensor
    t: Tensor
    memory: Tensor
    keys: Tensor
    valid: Tensor


def full_step(xp: Tensor, weights: Weights, s: Tensor, c: Tensor, t: Tensor, memory: Tensor,
              keys: Tensor, valid: Tensor, resets: Tensor, used: int) -> FullResult | None:
    """MemLSTM's step for one rollout step without autograd, compiled (``full_step`` in
    ``rlmem/cells/csrc/loops.cpp``): :meth:`rlmem.cells.memlstm.MemLSTM.step` attending over the
    slots ``[0, used)``, which must hold every state of every batch item. ``None`` where it does
    not apply (more than one step, autograd, another dtype, no compiled loops), for the caller to
    run the step in Python.

    Shapes: as :func:`full_scan`, with ``T = 1``.
    """
    native = extension.ops(xp)
    tensors = (xp, *weights, s, c, memory, keys)
    if (native is None or xp.shape[0] != 1 or xp.dtype not in TIME_LIMIT
            or (torch.is_grad_enabled() and any(tensor.requires_grad for tensor in tensors))):
        return None
    if bool(resets.any()):  # on the CPU, reading the flag costs no sync
        s, c, t, memory, keys, valid = reset_state(_FullFields(s, c, t, memory, keys, valid),
                                                   resets[0])
    # The new memory and keys: recycled, fresh blocks of that size cost as much in page
    # faults as the step itself.
    memory_out, keys_out = (WORKSPACE.take_unshared(memory.shape, memory.dtype, memory.device,
                                                    native.storage_use_count, rows=used)
                            for _ in range(2))
    y, c, t, valid, attention, slot_time = native.full_step(
        xp[0], s, c, t, memory, keys, valid, weights.recurrent, weights.key, weights.score,
        weights.query_bias, used, memory_out, keys_out)
    memory, keys = memory_out, keys_out
    return FullResult(y=y.unsqueeze(0), c=c, memory=memory, keys=keys, t=t, valid=valid,
                      traces={"attention": attention.unsqueeze(0),
                              "slot_time": slot_time.unsqueeze(0)})


class _ScreenedFields(NamedTuple):
    """The screened cells' state fields, for :func:`rlmem.cells.base.reset_state`."""

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
    (``screened_step`` in ``rlmem/cells/csrc/loops.cpp``): the cell's :meth:`step`, Algorithm
    1's screening on a tanh or LSTM base. ``None`` where it does not apply (more than one
    step, autograd, another dtype, no compiled loops), for the caller to run the step in
    Python.

    Shapes: as :func:`screened_scan`, with ``T = 1``.
    """
    native = extension.ops(xp)
    tensors = (xp, *weights, s0, c0, short, short_score, relevant, relevant_score)
    if (native is None or xp.shape[0] != 1 or xp.dtype not in TIME_LIMIT
            or (torch.is_grad_enabled()
                and any(t is not None and t.requires_grad for t in tensors))):
        return None
    empty = xp.new_empty(0)
    fields = _ScreenedFields(s0, c0 if c0 is not None else s0, t0, short, short_score,
                             short_valid, short_time, relevant, relevant_score,
                             relevant_valid, relevant_time)
    if bool(resets.any()):  # on the CPU, reading the flag costs no sync
        fields = _ScreenedFields(*reset_state(fields, resets[0]))
    (y, c, t, short, short_score, short_valid, short_time, relevant, relevant_score,
     relevant_valid, relevant_time, attention, slot_time) = native.screened_step(
        xp[0], fields.s, fields.c if c0 is not None else empty, *fields[2:], *weights)
    traces = {"attention": attention, "slot_time": slot_time,
              "relevant_valid": relevant_valid, "relevant_score": relevant_score}
    return ScreenedResult(
        y=y.unsqueeze(0), c=c if c0 is not None else None, t=t, short=short,
        short_score=short_score, short_valid=short_valid, short_time=short_time,
        relevant=relevant, relevant_score=relevant_score, relevant_valid=relevant_valid,
        relevant_time=relevant_time,
        traces={key: value.unsqueeze(0) for key, value in traces.items()})

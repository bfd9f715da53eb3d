"""MemLSTM: an LSTM with full additive self-attention over every past state of the episode.

Reference: D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly Learning to
Align and Translate", 2014; used as the MemRNN/MemLSTM baseline of Kerg et al. (2020), §3.
"""

from __future__ import annotations

import warnings
from typing import Annotated, NamedTuple

import torch
from torch import Tensor

from rlmem.cells._engines import full_attention
from rlmem.cells._engines.attentive_paths import outside_autocast, wants_engine
from rlmem.cells._engines.weight_cache import prepared
from rlmem.cells.attention import AdditiveAttention, Weights, project
from rlmem.cells.base import Cell, Dims
from rlmem.cells.host_reads import latest_start
from rlmem.cells.lstm_base import LSTMBase
from rlmem.cells.registry import register
from rlmem.cells.time_loop import ScanResult, episode_time


class MemoryOverflowWarning(UserWarning):
    """An episode outgrew MemLSTM's ``capacity``: its attention became a sliding window."""


class MemLSTMState(NamedTuple):
    s: Annotated[Tensor, Dims("hidden_size")]
    """Macro-state :math:`s_{t-1}`, ``(B, H)``."""
    c: Annotated[Tensor, Dims("hidden_size")]
    """LSTM cell state, ``(B, H)``."""
    t: Annotated[Tensor, Dims(dtype=torch.long)]
    """Steps consumed since the episode started, ``(B,)`` long; slot ``t mod capacity`` is next."""
    memory: Annotated[Tensor, Dims("capacity", "hidden_size")]
    """Every past state :math:`h_i` of the episode, ``(B, capacity, H)``; empty slots hold
    zeros (a reset clears them), which lets a rollout step copy only the slots in use."""
    keys: Annotated[Tensor, Dims("capacity", "hidden_size")]
    """Cached :math:`U_a h_i`, ``(B, capacity, H)``: each step projects only its new state."""
    valid: Annotated[Tensor, Dims("capacity", dtype=torch.bool)]
    """Which slots hold a state, ``(B, capacity)`` bool."""


@register("memlstm")
class MemLSTM(Cell):
    r"""LSTM with self-attention over all its past states (MemLSTM, Kerg et al. 2020, §3).

    .. math::
        (h_t, c_t) &= \mathrm{LSTMCell}(x_t, (s_{t-1}, c_{t-1})) \qquad
        M_t = \{h_1, \dots, h_t\} \\
        \tilde z_i &= v_a^\top \tanh(W_a s_{t-1} + U_a h_i) \qquad
        s_t = h_t + \textstyle\sum_i \mathrm{softmax}(\tilde z)_i\, h_i

    The memory is held as ``capacity`` slots with a validity mask, so the state has a fixed
    shape. Attention is exactly full while an episode is at most ``capacity`` steps long; past
    that, the oldest state is overwritten: a sliding window over the last ``capacity`` states,
    which is no longer the paper's model. The first time that happens the cell warns
    (:class:`MemoryOverflowWarning`, once per cell), and the diagnostic ``memory_overflow``
    reports the fraction of steps that attended a window. Size ``capacity`` to the longest
    episode; evaluations raise it where it is shorter (:attr:`episode_bound`):
    ``rlmem.evaluate`` to the evaluation env's step limit, ``rlmem.supervised`` to the longest
    sequence of its ``eval_seq_lens``.
    Cost per step is O(t), the episode's length so far (at most ``capacity``): O(T²) over a
    sequence, the contrast with relevancy screening that Kerg et al. make.

    The reference loop is :func:`~rlmem.cells.time_loop.scan` over :meth:`step`. Its engine
    (:mod:`rlmem.cells._engines.full_attention`) runs a chunk without autograd inside the
    loop, with a hand-written backward, each step reading only the slots an episode of the
    chunk can hold, without copying the memory, in the parameters' dtype even under autocast;
    and a rollout's single steps without autograd through a compiled step; both compute in
    the doubled form of :mod:`rlmem.cells.attention` (:math:`\tanh(x) = 2\sigma(2x) - 1`).
    :meth:`step` is the textbook form, the reference they are tested against, and runs
    otherwise: a few steps without autograd, without the compiled loops (or off the CPU), and
    parameters other than float32 and float64.

    Args:
        input_size: features of each input.
        hidden_size: size of :math:`h`, :math:`s` and each memory slot.
        capacity: number of past states held (the longest exactly-attended episode).
        forget_bias: initial forget-gate bias of the LSTM base (see :class:`~rlmem.cells.LSTM`).
        chrono_t_max: the LSTM base's chrono initialisation (see :class:`~rlmem.cells.LSTM`).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``, the macro-states :math:`s_t`
        - state: :class:`MemLSTMState`; traces ``attention`` ``(T, B, capacity)`` and
          ``slot_time`` ``(T, B, capacity)`` (episode step each slot holds, -1 when empty)
    """

    state_type = MemLSTMState
    episode_bound = "capacity"

    def __init__(self, input_size: int, hidden_size: int, *, capacity: int = 256,
                 forget_bias: float | None = 1.0,
                 chrono_t_max: int | None = None) -> None:
        super().__init__(input_size, hidden_size)
        if capacity < 1:
            raise ValueError(f"MemLSTM: capacity must be ≥ 1, got {capacity}")
        self.capacity = capacity
        self.base = LSTMBase(input_size, hidden_size, forget_bias, chrono_t_max)
        self.attention = AdditiveAttention(hidden_size)
        self.overflow_warned = False
        """Whether this cell has warned that an episode outgrew ``capacity``."""

    def doubled_weights(self) -> tuple[Tensor, Tensor, Weights]:
        """What the engines read: the transposed input weight and the bias of the gates' input
        terms, and the recurrent :class:`~rlmem.cells.attention.Weights`, in the doubled form
        of :mod:`rlmem.cells.attention`; kept between calls without autograd
        (:func:`~rlmem.cells._engines.weight_cache.prepared`)."""
        def build() -> tuple[Tensor, Tensor, Weights]:
            w_in, b_in, w_rec = self.base.doubled()
            query, query_bias, key, score = self.attention.doubled()
            return (w_in.t().contiguous(), b_in,
                    Weights(torch.cat([w_rec, query]), key, score, query_bias))
        return prepared(self, build)

    def project_input(self, x: Tensor) -> Tensor:
        """The LSTM gates' input terms :math:`W_{ih} x_t + b_{ih} + b_{hh}`, all steps at once.

        Shapes: x ``(T, B, input_size)``; returns ``(T, B, 4 hidden_size)``.
        """
        return self.base.input_terms(x)

    def step(self, x_t: Tensor, state: MemLSTMState) -> tuple[Tensor, MemLSTMState,
                                                               dict[str, Tensor]]:
        r"""One step of the docstring's equations, as Kerg et al. (2020, §3) write them: the
        reference the engines are proved equal to. ``x_t`` is a step of
        :meth:`project_input`, ``(B, 4H)``.

        .. math::
            (h_t, c_t) = \mathrm{LSTM}(x_t, s_{t-1}, c_{t-1}) \qquad
            M_t = M_{t-1} \cup \{h_t\} \qquad
            s_t = h_t + \textstyle\sum_{h_i \in M_t}
            \mathrm{softmax}_i\big(v_a^\top \tanh(W_a s_{t-1} + U_a h_i)\big)\, h_i

        :math:`h_t` goes into slot ``t mod capacity`` (the oldest state once the memory is
        full) with its key :math:`U_a h_t`; the attention covers every valid slot.
        """
        h, c = self.base.step(x_t, state.s, state.c)
        rows = torch.arange(h.shape[0], device=h.device)
        slot = state.t % self.capacity
        memory = state.memory.index_put((rows, slot), h)
        keys = state.keys.index_put((rows, slot), self.attention.keys(h))
        valid = state.valid.index_put((rows, slot), torch.ones_like(slot, dtype=torch.bool))
        weights_t, read = self.attention(state.s, memory, valid, keys)
        s = h + read
        # Slot j holds the most recent step ≡ j (mod capacity) that is ≤ t.
        slots = torch.arange(self.capacity, device=h.device)
        slot_time = state.t.unsqueeze(1) - (state.t.unsqueeze(1) - slots) % self.capacity
        traces = {"attention": weights_t, "slot_time": slot_time.masked_fill(~valid, -1)}
        return s, MemLSTMState(s, c, state.t + 1, memory, keys, valid), traces

    def fast_scan(self, x: Tensor, state: MemLSTMState, resets: Tensor) -> ScanResult | None:
        """The chunk through the first path that takes it: under autocast, the same paths in
        the parameters' dtype with autocast off; the chunk engine
        (:func:`~rlmem.cells._engines.full_attention.full_scan`: chunks of
        :data:`~rlmem.cells._engines.attentive_paths.STEP_PATH_STEPS` steps or more, or under
        autograd; float32 and float64); the compiled rollout step
        (:func:`~rlmem.cells._engines.full_attention.full_step`: one step without autograd,
        over the slots the longest episode can hold); else ``None``: :meth:`step` runs."""
        self._warn_on_overflow(state.t, resets)
        escaped = outside_autocast(self._scan, x, state, resets, self.attention.score.weight.dtype)
        if escaped is not None:
            return escaped
        w_in, bias, weights = self.doubled_weights()
        xp = project(x, w_in, bias)
        result = None
        if wants_engine(x.shape[0], (xp, *weights, *state)):
            result = full_attention.full_scan(xp, weights, state.s, state.c, state.memory,
                                              state.keys, state.valid, state.t, resets)
        if result is None and x.shape[0] == 1:
            # A rollout's step: the slots the longest episode can reach, one host read.
            used = min(latest_start(state.t) + 1, self.capacity)
            result = full_attention.full_step(xp, weights, state.s, state.c, state.t,
                                              state.memory, state.keys, state.valid, resets, used)
        if result is None:
            return None
        return ScanResult(result.y, MemLSTMState(result.y[-1], result.c, result.t,
                                                 result.memory, result.keys, result.valid),
                          result.traces)

    def _warn_on_overflow(self, t0: Tensor, resets: Tensor) -> None:
        """Warn, once per cell, when an episode of this chunk outgrows ``capacity``.

        Before the chunk runs (through the engine, which takes every chunk), from what the
        chunk starts with: until the warning has fired, one host read per call of a bound on
        the longest episode (free on CPU; on an accelerator it waits for ``t0``, as the
        engine's own read of the chunk's resets does), and only when the bound exceeds
        ``capacity`` a second for the exact length. Afterwards, none.
        """
        if self.overflow_warned or latest_start(t0) + resets.shape[0] <= self.capacity:
            return
        longest = int(episode_time(t0, resets).max()) + 1
        if longest <= self.capacity:
            return
        self.overflow_warned = True
        warnings.warn(
            f"MemLSTM: an episode reached {longest} steps, past capacity={self.capacity}; "
            f"from there on it attends over its last {self.capacity} states only (a sliding "
            "window, not full attention). Set the capacity to the longest episode "
            "(memory.capacity=..., or +eval_memory.capacity=... to evaluate). Warned once per "
            "cell; the diagnostic memory_overflow counts the steps.",
            MemoryOverflowWarning, stacklevel=5)

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        """Attention entropy, slot occupancy, and ``memory_overflow``: the fraction of steps
        whose episode had outgrown ``capacity`` (a slot holds episode step ≥ capacity)."""
        weights = traces["attention"].clamp(min=1e-12)
        slot_time = traces["slot_time"]
        return {"attention_entropy": -(weights * weights.log()).sum(-1).mean(),
                "memory_occupancy": (slot_time >= 0).float().mean(),
                "memory_overflow": (slot_time.amax(-1) >= self.capacity).float().mean()}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, capacity={self.capacity}"

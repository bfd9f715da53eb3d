"""MemLSTM: an LSTM with full additive self-attention over every past state of the episode.

Reference: D. Bahdanau, K. Cho, Y. Bengio. "Neural Machine Translation by Jointly Learning to
Align and Translate", 2014; used as the MemRNN/MemLSTM baseline of Kerg et al. (2020), §3.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor
from torch.nn import functional as F

from reference.attention import AdditiveAttention, LSTMBase
from reference.base import Cell


class MemLSTMState(NamedTuple):
    s: Tensor
    """Macro-state :math:`s_{t-1}`, ``(B, H)``."""
    c: Tensor
    """LSTM cell state, ``(B, H)``."""
    t: Tensor
    """Steps consumed since the episode started, ``(B,)`` long; slot ``t mod capacity`` is next."""
    memory: Tensor
    """Every past state :math:`h_i` of the episode, ``(B, capacity, H)``."""
    keys: Tensor
    """Cached :math:`U_a h_i`, ``(B, capacity, H)``: each step projects only its new state."""
    valid: Tensor
    """Which slots hold a state, ``(B, capacity)`` bool."""


class MemLSTM(Cell):
    r"""LSTM with self-attention over all its past states (MemLSTM, Kerg et al. 2020, §3).

    .. math::
        (h_t, c_t) &= \mathrm{LSTMCell}(x_t, (s_{t-1}, c_{t-1})) \qquad
        M_t = \{h_1, \dots, h_t\} \\
        \tilde z_i &= v_a^\top \tanh(W_a s_{t-1} + U_a h_i) \qquad
        s_t = h_t + \textstyle\sum_i \mathrm{softmax}(\tilde z)_i\, h_i

    The memory is held as ``capacity`` slots with a validity mask, so the state has a fixed
    shape. Attention is exactly full while an episode is at most ``capacity`` steps long; past
    that, the oldest state is overwritten. Cost per step is O(capacity), O(T²) over a sequence:
    the contrast with relevancy screening that Kerg et al. make.

    Args:
        input_size: features of each input.
        hidden_size: size of :math:`h`, :math:`s` and each memory slot.
        capacity: number of past states held (the longest exactly-attended episode).
        forget_bias: initial forget-gate bias of the LSTM base (see :class:`~rlmem.cells.LSTM`).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``, the macro-states :math:`s_t`
        - state: :class:`MemLSTMState`; traces ``attention`` ``(T, B, capacity)`` and
          ``slot_time`` ``(T, B, capacity)`` (episode step each slot holds, -1 when empty)
    """

    state_type = MemLSTMState

    def __init__(self, input_size: int, hidden_size: int, *, capacity: int = 256,
                 forget_bias: float = 1.0) -> None:
        super().__init__(input_size, hidden_size)
        if capacity < 1:
            raise ValueError(f"MemLSTM: capacity must be ≥ 1, got {capacity}")
        self.capacity = capacity
        self.base = LSTMBase(input_size, hidden_size, forget_bias)
        self.attention = AdditiveAttention(hidden_size)

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        hidden, slots = self.hidden_size, self.capacity
        return {"s": ((hidden,), None), "c": ((hidden,), None), "t": ((), torch.long),
                "memory": ((slots, hidden), None), "keys": ((slots, hidden), None),
                "valid": ((slots,), torch.bool)}

    def step(self, x_t: Tensor, state: MemLSTMState) -> tuple[Tensor, MemLSTMState,
                                                               dict[str, Tensor]]:
        h, c = self.base(x_t, state.s, state.c)
        rows = torch.arange(h.shape[0], device=h.device)
        slot = state.t % self.capacity
        memory = state.memory.index_put((rows, slot), h)
        keys = state.keys.index_put((rows, slot), self.attention.keys(h))
        valid = state.valid.index_put((rows, slot), torch.ones_like(slot, dtype=torch.bool))
        # Until a buffer wraps, slot j holds step j: only the prefix up to the longest episode
        # is occupied, so attention over it costs O(episode length), not O(capacity).
        used = min(int(state.t.max()) + 1, self.capacity)
        weights, read = self.attention(state.s, memory[:, :used], valid[:, :used],
                                       keys=keys[:, :used])
        s = h + read
        # Slot j holds the most recent step ≡ j (mod capacity) that is ≤ t.
        slots = torch.arange(self.capacity, device=h.device)
        slot_time = state.t.unsqueeze(1) - (state.t.unsqueeze(1) - slots) % self.capacity
        traces = {"attention": F.pad(weights, (0, self.capacity - used)),
                  "slot_time": slot_time.masked_fill(~valid, -1)}
        return s, MemLSTMState(s, c, state.t + 1, memory, keys, valid), traces

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        weights = traces["attention"].clamp(min=1e-12)
        return {"attention_entropy": -(weights * weights.log()).sum(-1).mean(),
                "memory_occupancy": (traces["slot_time"] >= 0).float().mean()}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, capacity={self.capacity}"

"""Additive (Bahdanau) attention over a bounded set of memory slots, and the LSTM step it reads.

Shared by :class:`~rlmem.cells.memlstm.MemLSTM` (every past state) and the relevancy-screening
cells (short-term buffer and relevant set).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from reference.lstm import LSTM_FORGET_GATE, init_gate_bias


class AdditiveAttention(nn.Module):
    r"""Scores and reads memory slots with the alignment of Bahdanau et al. (2014).

    .. math::
        \tilde z_i = v_a^\top \tanh(W_a q + U_a m_i) \qquad
        z = \mathrm{softmax}(\tilde z \text{ over valid slots}) \qquad
        \text{read} = \textstyle\sum_i z_i m_i

    Args:
        hidden_size: size of the query ``q`` and of each slot ``m_i``.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.query = nn.Linear(hidden_size, hidden_size)  # W_a (with the bias)
        self.key = nn.Linear(hidden_size, hidden_size, bias=False)  # U_a
        self.score = nn.Linear(hidden_size, 1, bias=False)  # v_a

    def keys(self, memory: Tensor) -> Tensor:
        """``U_a m`` for each slot; MemLSTM caches it so each step projects one new state."""
        return self.key(memory)

    def forward(self, query: Tensor, memory: Tensor, valid: Tensor,
                keys: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` over the valid slots of ``memory``.

        Every row of ``valid`` must have at least one true entry.

        Shapes:
            - query: ``(B, H)``; memory: ``(B, N, H)``; valid: ``(B, N)`` bool
            - keys (optional, ``U_a m``): ``(B, N, H)``
            - returns the weights ``z`` ``(B, N)`` (zero on invalid slots) and the read ``(B, H)``
        """
        keys = self.keys(memory) if keys is None else keys
        logits = self.score(torch.tanh(self.query(query).unsqueeze(1) + keys)).squeeze(-1)
        weights = torch.softmax(logits.masked_fill(~valid, float("-inf")), dim=-1)
        return weights, torch.einsum("bn,bnh->bh", weights, memory)


class LSTMBase(nn.Module):
    r"""The LSTM recurrence of an attentive cell, fed the macro-state :math:`s_{t-1}`.

    :math:`(h_t, c_t) = \mathrm{LSTMCell}(x_t, (s_{t-1}, c_{t-1}))`: the gates read
    :math:`[s_{t-1}, x_t]` and the cell state :math:`c` is carried as usual. The forget-gate
    bias starts at ``forget_bias`` (see :class:`rlmem.cells.LSTM`).
    """

    def __init__(self, input_size: int, hidden_size: int, forget_bias: float) -> None:
        super().__init__()
        self.forget_bias = forget_bias
        self.cell = nn.LSTMCell(input_size, hidden_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation, then the forget-gate bias set to ``forget_bias``."""
        self.cell.reset_parameters()
        init_gate_bias(self.cell.bias_ih, self.cell.bias_hh, self.cell.hidden_size,
                       LSTM_FORGET_GATE, self.forget_bias)

    def forward(self, x_t: Tensor, s: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """Shapes: x_t ``(B, input)``, s and c ``(B, H)``; returns ``h_t, c_t``, each ``(B, H)``."""
        return self.cell(x_t, (s, c))

    def extra_repr(self) -> str:
        return f"forget_bias={self.forget_bias}"

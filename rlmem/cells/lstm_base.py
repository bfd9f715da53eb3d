r"""The LSTM recurrence of the attentive cells (MemLSTM, ReLSTM), fed their macro-state, with
its step in the "doubled" form that their engines share (:mod:`rlmem.cells.attention`)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells._engines.onednn_linear import linear
from rlmem.cells.gate_bias import init_lstm_gate_biases, lstm_gate_bias_repr

LSTM_GATE_G = 2
"""Block of the cell-input gate ``g`` (the one under a tanh) in torch's LSTM weights."""


class LSTMBase(nn.Module):
    r"""The LSTM recurrence of an attentive cell, fed the macro-state :math:`s_{t-1}`.

    :math:`(h_t, c_t) = \mathrm{LSTMCell}(x_t, (s_{t-1}, c_{t-1}))`: the gates read
    :math:`[s_{t-1}, x_t]` and the cell state :math:`c` is carried as usual. The gate biases
    start by ``forget_bias`` or ``chrono_t_max``, as in :class:`rlmem.cells.LSTM`.
    """

    def __init__(self, input_size: int, hidden_size: int, forget_bias: float | None,
                 chrono_t_max: int | None = None) -> None:
        super().__init__()
        self.forget_bias = forget_bias
        self.chrono_t_max = chrono_t_max
        self.cell = nn.LSTMCell(input_size, hidden_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation, then the gate biases by ``forget_bias`` or ``chrono_t_max``."""
        self.cell.reset_parameters()
        init_lstm_gate_biases(self.cell.bias_ih, self.cell.bias_hh, self.cell.hidden_size,
                              self.forget_bias, self.chrono_t_max)

    def forward(self, x_t: Tensor, s: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        """Shapes: x_t ``(B, input)``, s and c ``(B, H)``; returns ``h_t, c_t``, each ``(B, H)``."""
        return self.cell(x_t, (s, c))

    def input_terms(self, x: Tensor) -> Tensor:
        """The gates' input terms :math:`W_{ih} x + b_{ih} + b_{hh}`, for any leading shape.

        Shapes: x ``(..., input)``; returns ``(..., 4H)``.
        """
        cell = self.cell
        return linear(x, cell.weight_ih, cell.bias_ih + cell.bias_hh)

    def step(self, x_t: Tensor, s: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        r"""One LSTM step, as the textbook writes it, from the gates' input terms ``x_t``
        (:meth:`input_terms`) and the macro-state :math:`s_{t-1}`:

        .. math::
            (i, f, g, o) = W_{hh} s_{t-1} + x_t \qquad
            c_t = \sigma(f) c_{t-1} + \sigma(i) \tanh(g) \qquad
            h_t = \sigma(o) \tanh(c_t)

        Shapes: x_t ``(B, 4H)``; s, c ``(B, H)``; returns ``h_t, c_t``.
        """
        i, f, g, o = (x_t + functional.linear(s, self.cell.weight_hh)).chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c

    def doubled(self) -> tuple[Tensor, Tensor, Tensor]:
        """``W_ih, b_ih + b_hh, W_hh`` with the rows of the ``g`` gate (the one under a tanh)
        doubled, so that ``g = 2σ(z_g) - 1`` (see :meth:`step_doubled`).

        Shapes: ``(4H, input)``, ``(4H,)``, ``(4H, H)``.
        """
        cell, hidden = self.cell, self.cell.hidden_size
        scale = torch.ones(4, 1, dtype=cell.weight_ih.dtype, device=cell.weight_ih.device)
        scale[LSTM_GATE_G] = 2.0
        return ((cell.weight_ih.view(4, hidden, -1) * scale.unsqueeze(2)).view(4 * hidden, -1),
                ((cell.bias_ih + cell.bias_hh).view(4, hidden) * scale).view(-1),
                (cell.weight_hh.view(4, hidden, -1) * scale.unsqueeze(2)).view(4 * hidden, -1))

    @staticmethod
    def step_doubled(z: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
        r"""One LSTM step from its full pre-activation, ``g`` block doubled (:meth:`doubled`).

        .. math::
            i, f, o = \sigma(z_i), \sigma(z_f), \sigma(z_o) \qquad g = 2\sigma(z_g) - 1
            \qquad c_t = f c_{t-1} + i g \qquad h_t = o\,(2\sigma(2 c_t) - 1)

        Shapes: z ``(B, 4H)``, c ``(B, H)``; returns ``h_t, c_t``.
        """
        i, f, g, o = torch.sigmoid(z).chunk(4, dim=1)
        c = f * c + i * (2.0 * g - 1.0)
        return o * (2.0 * torch.sigmoid(2.0 * c) - 1.0), c

    def extra_repr(self) -> str:
        return lstm_gate_bias_repr(self.forget_bias, self.chrono_t_max)

"""LSTM and GRU: torch's fused kernels behind the rlmem cell contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from reference.base import Cell
from reference.fused import scan_segments


class LSTMState(NamedTuple):
    h: Tensor
    """Hidden state, ``(B, hidden_size)``."""
    c: Tensor
    """Cell state, ``(B, hidden_size)``."""


class GRUState(NamedTuple):
    h: Tensor
    """Hidden state, ``(B, hidden_size)``."""


LSTM_FORGET_GATE = 1
"""Block of the forget gate in torch's LSTM weights and biases (gates stacked i, f, g, o)."""

GRU_UPDATE_GATE = 1
"""Block of the update gate z in torch's GRU weights and biases (gates stacked r, z, n)."""


def init_gate_bias(bias_ih: Tensor, bias_hh: Tensor, hidden_size: int, gate: int,
                   value: float) -> None:
    """Start one gate of a torch LSTM/GRU (cell) at the pre-activation bias ``value``.

    torch adds two biases, ``b_i*`` and ``b_h*``, each stacking its gates in blocks of
    ``hidden_size``. The input-side block of ``gate`` is set to ``value`` and the hidden-side
    block to 0, so their sum, the gate's bias, is ``value``.
    """
    rows = slice(gate * hidden_size, (gate + 1) * hidden_size)
    with torch.no_grad():
        bias_ih[rows] = value
        bias_hh[rows] = 0.0


class LSTM(Cell):
    r"""Long short-term memory (Hochreiter & Schmidhuber, 1997), as :class:`torch.nn.LSTM`.

    .. math::
        i_t &= \sigma(W_{ii} x_t + W_{hi} h_{t-1} + b_i) \qquad
        f_t = \sigma(W_{if} x_t + W_{hf} h_{t-1} + b_f) \\
        g_t &= \tanh(W_{ig} x_t + W_{hg} h_{t-1} + b_g) \qquad
        o_t = \sigma(W_{io} x_t + W_{ho} h_{t-1} + b_o) \\
        c_t &= f_t \odot c_{t-1} + i_t \odot g_t \qquad h_t = o_t \odot \tanh(c_t)

    The output is :math:`h_t`. Each reset-free segment of a chunk runs through the fused
    ``nn.LSTM`` kernel; the per-step path uses the same weights.

    Initialisation: torch's uniform :math:`\pm 1/\sqrt{H}`, except the forget-gate bias
    :math:`b_f` = ``forget_bias`` (default 1; Gers et al., 2000; Jozefowicz et al., 2015). With
    torch's 0, :math:`f_t` starts near 0.5 and a cue fades within a few steps: on MiniGrid
    MemoryS7 an LSTM agent stayed at chance with bias 0 and solved the task with bias 1.

    Args:
        input_size: features of each input.
        hidden_size: features of :math:`h` and :math:`c`.
        forget_bias: initial bias of the forget gate (0 is torch's default).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`LSTMState`, each ``(B, hidden_size)``
    """

    state_type = LSTMState

    def __init__(self, input_size: int, hidden_size: int, *, forget_bias: float = 1.0) -> None:
        super().__init__(input_size, hidden_size)
        self.forget_bias = forget_bias
        self.rnn = nn.LSTM(input_size, hidden_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation, then the forget-gate bias set to ``forget_bias``."""
        self.rnn.reset_parameters()
        init_gate_bias(self.rnn.bias_ih_l0, self.rnn.bias_hh_l0, self.hidden_size,
                       LSTM_FORGET_GATE, self.forget_bias)

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {"h": ((self.hidden_size,), None), "c": ((self.hidden_size,), None)}

    def step(self, x_t: Tensor, state: LSTMState) -> tuple[Tensor, LSTMState, dict[str, Tensor]]:
        h, c = torch.lstm_cell(x_t, (state.h, state.c), self.rnn.weight_ih_l0,
                               self.rnn.weight_hh_l0, self.rnn.bias_ih_l0, self.rnn.bias_hh_l0)
        return h, LSTMState(h, c), {}

    def _run_fused(self, x: Tensor, state: LSTMState) -> tuple[Tensor, LSTMState]:
        y, (h, c) = self.rnn(x, (state.h.unsqueeze(0).contiguous(),
                                 state.c.unsqueeze(0).contiguous()))
        return y, LSTMState(h.squeeze(0), c.squeeze(0))

    def _scan(self, x: Tensor, state: LSTMState,
              resets: Tensor) -> tuple[Tensor, LSTMState, dict[str, Tensor]]:
        return scan_segments(self._run_fused, x, state, resets)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, forget_bias={self.forget_bias}"


class GRU(Cell):
    r"""Gated recurrent unit (Cho et al., 2014), as :class:`torch.nn.GRU`.

    .. math::
        r_t &= \sigma(W_{ir} x_t + W_{hr} h_{t-1} + b_r) \qquad
        z_t = \sigma(W_{iz} x_t + W_{hz} h_{t-1} + b_z) \\
        n_t &= \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn})) \qquad
        h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}

    Each reset-free segment runs through the fused ``nn.GRU`` kernel.

    Initialisation: torch's uniform :math:`\pm 1/\sqrt{H}`, except the update-gate bias
    :math:`b_z` = ``update_bias``. A positive value starts :math:`z_t` above 0.5, so the state
    is mostly kept (the GRU analogue of an LSTM forget-gate bias of 1; Jozefowicz et al., 2015;
    the "chrono" view of Tallec & Ollivier, 2018). The default is torch's 0.

    Args:
        input_size: features of each input.
        hidden_size: features of :math:`h`.
        update_bias: initial bias of the update gate :math:`z` (0 is torch's default).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`GRUState`, ``(B, hidden_size)``
    """

    state_type = GRUState

    def __init__(self, input_size: int, hidden_size: int, *, update_bias: float = 0.0) -> None:
        super().__init__(input_size, hidden_size)
        self.update_bias = update_bias
        self.rnn = nn.GRU(input_size, hidden_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation, then the update-gate bias set to ``update_bias``."""
        self.rnn.reset_parameters()
        init_gate_bias(self.rnn.bias_ih_l0, self.rnn.bias_hh_l0, self.hidden_size,
                       GRU_UPDATE_GATE, self.update_bias)

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {"h": ((self.hidden_size,), None)}

    def step(self, x_t: Tensor, state: GRUState) -> tuple[Tensor, GRUState, dict[str, Tensor]]:
        h = torch.gru_cell(x_t, state.h, self.rnn.weight_ih_l0, self.rnn.weight_hh_l0,
                           self.rnn.bias_ih_l0, self.rnn.bias_hh_l0)
        return h, GRUState(h), {}

    def _run_fused(self, x: Tensor, state: GRUState) -> tuple[Tensor, GRUState]:
        y, h = self.rnn(x, state.h.unsqueeze(0).contiguous())
        return y, GRUState(h.squeeze(0))

    def _scan(self, x: Tensor, state: GRUState,
              resets: Tensor) -> tuple[Tensor, GRUState, dict[str, Tensor]]:
        return scan_segments(self._run_fused, x, state, resets)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, update_bias={self.update_bias}"

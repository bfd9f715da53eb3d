"""LSTM and GRU: torch's fused kernels behind the rlmem cell contract."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells.base import Cell
from rlmem.cells.fused import scan_segments
from rlmem.cells.registry import register


class LSTMState(NamedTuple):
    h: Tensor
    """Hidden state, ``(B, hidden_size)``."""
    c: Tensor
    """Cell state, ``(B, hidden_size)``."""


class GRUState(NamedTuple):
    h: Tensor
    """Hidden state, ``(B, hidden_size)``."""


@register("lstm")
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

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`LSTMState`, each ``(B, hidden_size)``
    """

    state_type = LSTMState

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.rnn = nn.LSTM(input_size, hidden_size)

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


@register("gru")
class GRU(Cell):
    r"""Gated recurrent unit (Cho et al., 2014), as :class:`torch.nn.GRU`.

    .. math::
        r_t &= \sigma(W_{ir} x_t + W_{hr} h_{t-1} + b_r) \qquad
        z_t = \sigma(W_{iz} x_t + W_{hz} h_{t-1} + b_z) \\
        n_t &= \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn})) \qquad
        h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}

    Each reset-free segment runs through the fused ``nn.GRU`` kernel.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`GRUState`, ``(B, hidden_size)``
    """

    state_type = GRUState

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.rnn = nn.GRU(input_size, hidden_size)

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

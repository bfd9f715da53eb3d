"""LSTM (Hochreiter & Schmidhuber, 1997) behind the rlmem cell contract, on torch's weights."""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells._engines import fused_rnn
from rlmem.cells.base import Cell, Dims
from rlmem.cells.gate_bias import init_lstm_gate_biases, lstm_gate_bias_repr
from rlmem.cells.registry import register
from rlmem.cells.time_loop import ScanResult


class LSTMState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]
    """Hidden state, ``(B, hidden_size)``."""
    c: Annotated[Tensor, Dims("hidden_size")]
    """Cell state, ``(B, hidden_size)``."""


@register("lstm")
class LSTM(Cell):
    r"""Long short-term memory (Hochreiter & Schmidhuber, 1997), as :class:`torch.nn.LSTM`.

    .. math::
        i_t &= \sigma(W_{ii} x_t + W_{hi} h_{t-1} + b_i) \qquad
        f_t = \sigma(W_{if} x_t + W_{hf} h_{t-1} + b_f) \\
        g_t &= \tanh(W_{ig} x_t + W_{hg} h_{t-1} + b_g) \qquad
        o_t = \sigma(W_{io} x_t + W_{ho} h_{t-1} + b_o) \\
        c_t &= f_t \odot c_{t-1} + i_t \odot g_t \qquad h_t = o_t \odot \tanh(c_t)

    The output is :math:`h_t`. The reference loop is :func:`~rlmem.cells.time_loop.scan` over
    :meth:`step` (``torch.lstm_cell``); its engine (:mod:`~rlmem.cells._engines.fused_rnn`)
    runs each reset-free segment of a chunk through the fused ``nn.LSTM`` kernel, on the same
    weights.

    Initialisation: torch's uniform :math:`\pm 1/\sqrt{H}`, except the forget-gate bias
    :math:`b_f` = ``forget_bias`` (default 1; Gers et al., 2000; Jozefowicz et al., 2015). With
    0, :math:`f_t` starts near 0.5 and a cue fades within a few steps: on MiniGrid MemoryS7 an
    LSTM agent stayed at chance with bias 0 and solved the task with bias 1. ``None`` keeps
    torch's own draw, a bias near 0 that differs per unit (the ReLSTM authors' script).
    ``chrono_t_max`` instead draws the forget and input gates' biases by the chrono
    initialisation (Tallec & Ollivier, 2018; :func:`~rlmem.cells.gate_bias.init_lstm_gate_biases`).

    Args:
        input_size: features of each input.
        hidden_size: features of :math:`h` and :math:`c`.
        forget_bias: initial bias of the forget gate; ``None`` keeps torch's random one
            (:func:`~rlmem.cells.gate_bias.init_gate_bias`).
        chrono_t_max: the longest dependency, in steps, of the chrono initialisation; ``None``
            (default) leaves it off. Requires ``forget_bias=None``.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`LSTMState`, each ``(B, hidden_size)``
    """

    state_type = LSTMState

    def __init__(self, input_size: int, hidden_size: int, *,
                 forget_bias: float | None = 1.0, chrono_t_max: int | None = None) -> None:
        super().__init__(input_size, hidden_size)
        self.forget_bias = forget_bias
        self.chrono_t_max = chrono_t_max
        self.rnn = nn.LSTM(input_size, hidden_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """torch's initialisation, then the gate biases by ``forget_bias`` or ``chrono_t_max``."""
        self.rnn.reset_parameters()
        _, _, bias_ih, bias_hh = self.rnn.all_weights[0]
        init_lstm_gate_biases(bias_ih, bias_hh, self.hidden_size, self.forget_bias,
                              self.chrono_t_max)

    def step(self, x_t: Tensor, state: LSTMState) -> tuple[Tensor, LSTMState, dict[str, Tensor]]:
        h, c = torch.lstm_cell(x_t, (state.h, state.c), *self.rnn.all_weights[0])
        return h, LSTMState(h, c), {}

    def fast_scan(self, x: Tensor, state: LSTMState, resets: Tensor) -> ScanResult:
        return fused_rnn.lstm(x, self.rnn.all_weights[0], state, resets,
                              train=self.rnn.training)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, "
                f"{lstm_gate_bias_repr(self.forget_bias, self.chrono_t_max)}")

"""Starting one gate of torch's LSTM and GRU weights at a chosen bias.

torch stacks the gates of an LSTM (``i, f, g, o``) and of a GRU (``r, z, n``) in blocks of
``hidden_size`` rows of each weight and bias; the constants here name the blocks the cells set.
"""

from __future__ import annotations

import torch
from torch import Tensor

LSTM_FORGET_GATE = 1
"""Block of the forget gate in torch's LSTM weights and biases (gates stacked i, f, g, o)."""

GRU_UPDATE_GATE = 1
"""Block of the update gate z in torch's GRU weights and biases (gates stacked r, z, n)."""


def init_gate_bias(bias_ih: Tensor, bias_hh: Tensor, hidden_size: int, gate: int,
                   value: float | None) -> None:
    """Start one gate of a torch LSTM/GRU (cell) at the pre-activation bias ``value``.

    torch adds two biases, ``b_i*`` and ``b_h*``, each stacking its gates in blocks of
    ``hidden_size``. The input-side block of ``gate`` is set to ``value`` and the hidden-side
    block to 0, so their sum, the gate's bias, is ``value``. ``None`` leaves torch's own
    initialisation, both blocks drawn from :math:`U(-1/\\sqrt{H}, 1/\\sqrt{H})`: the gate's bias
    then varies per unit around 0, where ``value=0`` makes it exactly 0 for every unit.
    """
    if value is None:
        return
    rows = slice(gate * hidden_size, (gate + 1) * hidden_size)
    with torch.no_grad():
        bias_ih[rows] = value
        bias_hh[rows] = 0.0

"""Starting one gate of torch's LSTM and GRU weights at a chosen bias.

torch stacks the gates of an LSTM (``i, f, g, o``) and of a GRU (``r, z, n``) in blocks of
``hidden_size`` rows of each weight and bias; the constants here name the blocks the cells set.
"""

from __future__ import annotations

import torch
from torch import Tensor

LSTM_INPUT_GATE = 0
"""Block of the input gate in torch's LSTM weights and biases (gates stacked i, f, g, o)."""

LSTM_FORGET_GATE = 1
"""Block of the forget gate in torch's LSTM weights and biases (gates stacked i, f, g, o)."""

GRU_UPDATE_GATE = 1
"""Block of the update gate z in torch's GRU weights and biases (gates stacked r, z, n)."""


def init_gate_bias(bias_ih: Tensor, bias_hh: Tensor, hidden_size: int, gate: int,
                   value: float | Tensor | None) -> None:
    """Start one gate of a torch LSTM/GRU (cell) at the pre-activation bias ``value``.

    torch adds two biases, ``b_i*`` and ``b_h*``, each stacking its gates in blocks of
    ``hidden_size``. The input-side block of ``gate`` is set to ``value`` and the hidden-side
    block to 0, so their sum, the gate's bias, is ``value`` (one per unit if a tensor of
    ``hidden_size``). ``None`` leaves torch's own initialisation, both blocks drawn from
    :math:`U(-1/\\sqrt{H}, 1/\\sqrt{H})`: the gate's bias then varies per unit around 0, where
    ``value=0`` makes it exactly 0 for every unit.
    """
    if value is None:
        return
    rows = slice(gate * hidden_size, (gate + 1) * hidden_size)
    with torch.no_grad():
        bias_ih[rows] = value
        bias_hh[rows] = 0.0


def init_lstm_gate_biases(bias_ih: Tensor, bias_hh: Tensor, hidden_size: int,
                          forget_bias: float | None, chrono_t_max: int | None) -> None:
    r"""Start the gate biases of a torch LSTM (cell): every rlmem LSTM's one rule.

    With ``chrono_t_max`` unset, the forget gate starts at ``forget_bias``
    (:func:`init_gate_bias`). With it set, the chrono initialisation of Tallec & Ollivier
    (2018, "Can recurrent neural networks warp time?", §3) starts each unit with its own
    time scale, spread over the dependencies up to ``T_max`` steps long that the task holds:

    .. math::
        b_f \sim \log\big(\mathcal{U}([1, T_{max} - 1])\big) \qquad b_i = -b_f

    so unit :math:`j` forgets with a characteristic time of about :math:`e^{b_{f,j}}` steps.

    Raises:
        ValueError: ``chrono_t_max`` below 3 (the range ``[1, T_max - 1]`` would be empty or a
            point), or given with a ``forget_bias``, which chrono replaces.
    """
    if chrono_t_max is None:
        init_gate_bias(bias_ih, bias_hh, hidden_size, LSTM_FORGET_GATE, forget_bias)
        return
    if chrono_t_max < 3:
        raise ValueError(f"chrono_t_max must be at least 3 (b_f ~ log U[1, T_max - 1]), got "
                         f"{chrono_t_max}")
    if forget_bias is not None:
        raise ValueError(f"chrono_t_max={chrono_t_max} draws the forget-gate bias itself; set "
                         f"forget_bias=None (got {forget_bias})")
    forget = torch.empty(hidden_size, dtype=bias_ih.dtype, device=bias_ih.device)
    forget = torch.log(forget.uniform_(1.0, float(chrono_t_max - 1)))
    init_gate_bias(bias_ih, bias_hh, hidden_size, LSTM_FORGET_GATE, forget)
    init_gate_bias(bias_ih, bias_hh, hidden_size, LSTM_INPUT_GATE, -forget)


def lstm_gate_bias_repr(forget_bias: float | None, chrono_t_max: int | None) -> str:
    """The gate-bias options of :func:`init_lstm_gate_biases` as an ``extra_repr`` shows them."""
    chrono = "" if chrono_t_max is None else f", chrono_t_max={chrono_t_max}"
    return f"forget_bias={forget_bias}{chrono}"

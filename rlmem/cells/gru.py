"""GRU (Cho et al., 2014) behind the rlmem cell contract, on torch's weights."""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells._engines import fused_rnn
from rlmem.cells._engines.gru_chunk import GRULayout, gru_chunk
from rlmem.cells._engines.weight_cache import prepared
from rlmem.cells.base import Cell, Dims
from rlmem.cells.gate_bias import GRU_UPDATE_GATE, init_gate_bias
from rlmem.cells.registry import register
from rlmem.cells.time_loop import ScanResult


class GRUState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]
    """Hidden state, ``(B, hidden_size)``."""


@register("gru")
class GRU(Cell):
    r"""Gated recurrent unit (Cho et al., 2014), as :class:`torch.nn.GRU`.

    .. math::
        r_t &= \sigma(W_{ir} x_t + W_{hr} h_{t-1} + b_r) \qquad
        z_t = \sigma(W_{iz} x_t + W_{hz} h_{t-1} + b_z) \\
        n_t &= \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn})) \qquad
        h_t = (1 - z_t) \odot n_t + z_t \odot h_{t-1}

    The output is :math:`h_t`. The reference loop is :func:`~rlmem.cells.time_loop.scan` over
    :meth:`step` (``torch.gru_cell``); its engine (:meth:`fast_scan`) runs a chunk on the CPU
    as one call of the compiled loops (:mod:`~rlmem.cells._engines.gru_chunk`), elsewhere each
    reset-free segment through torch's ``nn.GRU`` kernel (cuDNN), on the same weights.

    Initialisation: torch's uniform :math:`\pm 1/\sqrt{H}`, except the update-gate bias
    :math:`b_z` = ``update_bias``. A positive value starts :math:`z_t` above 0.5, so the state
    is mostly kept (the GRU analogue of an LSTM forget-gate bias of 1; Jozefowicz et al., 2015;
    the "chrono" view of Tallec & Ollivier, 2018). The default is torch's 0: measured on
    MiniGrid's MemoryS7 (``experiments/memory/RESULTS.md``, one seed), 1 did not help, gru
    reaching a 100-episode mean of 0.9 after 322k frames against 180-252k with 0 (3 seeds),
    and SA-RNN after 334k against 207k.

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
        _, _, bias_ih, bias_hh = self.rnn.all_weights[0]
        init_gate_bias(bias_ih, bias_hh, self.hidden_size, GRU_UPDATE_GATE, self.update_bias)

    def step(self, x_t: Tensor, state: GRUState) -> tuple[Tensor, GRUState, dict[str, Tensor]]:
        h = torch.gru_cell(x_t, state.h, *self.rnn.all_weights[0])
        return h, GRUState(h), {}

    def fast_scan(self, x: Tensor, state: GRUState, resets: Tensor) -> ScanResult:
        """On the CPU the compiled chunk (:mod:`~rlmem.cells._engines.gru_chunk`: torch's CPU
        GRU is ATen's loop of small calls, which took 1.4-5.0x the chunk's time at every shape
        measured, ``benchmarks/results/gru_chunk_kernel.md``); elsewhere, or where the compiled
        loops do not run, torch's kernel per reset-free segment (:func:`~rlmem.cells._engines.
        fused_rnn.gru`: cuDNN on CUDA)."""
        if x.device.type == "cpu":
            layout = prepared(self, lambda: GRULayout.of(*self.rnn.all_weights[0]))
            whole = gru_chunk(x, layout, state.h, resets)
            if whole is not None:
                return ScanResult(whole[0], GRUState(whole[1]), {})
        return fused_rnn.gru(x, self.rnn.all_weights[0], state, resets,
                             train=self.rnn.training)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, update_bias={self.update_bias}"

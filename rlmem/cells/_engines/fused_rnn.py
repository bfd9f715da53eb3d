"""LSTM and GRU through torch's fused multi-step kernels (``nn.LSTM``, ``nn.GRU``: cuDNN on
CUDA, oneDNN or ATen's own loop on the CPU), one call per reset-free segment of a chunk."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from rlmem.cells.host_reads import steps_with_resets
from rlmem.cells.time_loop import ScanResult, reset_state

if TYPE_CHECKING:  # the cell modules import this one
    from rlmem.cells.gru import GRU, GRUState
    from rlmem.cells.lstm import LSTM, LSTMState


def lstm(cell: LSTM, x: Tensor, state: LSTMState, resets: Tensor) -> ScanResult:
    """:class:`~rlmem.cells.lstm.LSTM` over a chunk, through ``cell.rnn``: the weights of its
    step (``torch.lstm_cell``).

    Shapes: as :meth:`rlmem.cells.base.Cell.fast_scan`.
    """
    def run(segment: Tensor, state: LSTMState) -> tuple[Tensor, LSTMState]:
        y, (h, c) = cell.rnn(segment, (state.h.unsqueeze(0).contiguous(),
                                       state.c.unsqueeze(0).contiguous()))
        return y, type(state)(h.squeeze(0), c.squeeze(0))

    return scan_segments(run, x, state, resets)


def gru(cell: GRU, x: Tensor, state: GRUState, resets: Tensor) -> ScanResult:
    """:class:`~rlmem.cells.gru.GRU` over a chunk, through ``cell.rnn``: the weights of its step
    (``torch.gru_cell``).

    Shapes: as :meth:`rlmem.cells.base.Cell.fast_scan`.
    """
    def run(segment: Tensor, state: GRUState) -> tuple[Tensor, GRUState]:
        y, h = cell.rnn(segment, state.h.unsqueeze(0).contiguous())
        return y, type(state)(h.squeeze(0))

    return scan_segments(run, x, state, resets)


def scan_segments(run: Callable[[Tensor, Any], tuple[Tensor, Any]], x: Tensor, state: Any,
                  resets: Tensor) -> ScanResult:
    """Equivalent to :func:`rlmem.cells.base.scan`, with one fused call per reset-free segment.

    Time is cut at every step where any batch item resets; between the cuts no state is touched
    from outside, so ``run(x[start:end], state)`` can process the whole segment in one kernel.
    A chunk without resets inside it is a single call.

    Shapes:
        - x: ``(T, B, *)``; resets: ``(T, B)`` bool
        - run: ``(segment of x, state) -> (segment of y, state)``
    """
    steps = x.shape[0]
    flags = steps_with_resets(resets)
    cuts = [0, *(t for t in range(1, steps) if flags[t]), steps]
    outputs = []
    for start, end in itertools.pairwise(cuts):
        if start > 0 or flags[0]:
            state = reset_state(state, resets[start])
        y, state = run(x[start:end], state)
        outputs.append(y)
    return ScanResult(torch.cat(outputs) if len(outputs) > 1 else outputs[0], state, {})

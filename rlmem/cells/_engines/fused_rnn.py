"""LSTM and GRU through torch's fused multi-step kernels (``torch.lstm``, ``torch.gru``, what
``nn.LSTM`` and ``nn.GRU`` call: cuDNN on CUDA, oneDNN or ATen's own loop on the CPU), one call
per reset-free segment of a chunk; inside :func:`compiled_lstm`, the LSTM's chunk in one call
of the compiled loops instead (:mod:`.lstm_chunk`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from torch import Tensor

from rlmem.cells._engines.lstm_chunk import lstm_chunk
from rlmem.cells.host_reads import steps_with_resets
from rlmem.cells.time_loop import S, ScanResult, reset_state

_COMPILED_LSTM: ContextVar[bool] = ContextVar("rlmem_compiled_lstm", default=False)


@contextmanager
def compiled_lstm(enabled: bool = True) -> Iterator[None]:
    """Inside (with ``enabled``), an LSTM runs each chunk that a reset cuts (on the CPU) in one
    call of the compiled loops with its resets inside (:mod:`.lstm_chunk`), instead of torch's
    fused kernel once per reset-free segment: the same function rounded otherwise, several
    times faster on chunks that many resets cut (``docs/performance.md#compiled-lstm``). Off by
    default, so that ``nn.LSTM``'s own kernel runs unless a caller asks (our PPO:
    ``agent.compiled_lstm``). Set per thread: a thread that runs the cell enters it itself.
    """
    token = _COMPILED_LSTM.set(enabled)
    try:
        yield
    finally:
        _COMPILED_LSTM.reset(token)


def lstm(x: Tensor, weights: Sequence[Tensor], state: S, resets: Tensor, *,
         train: bool) -> ScanResult:
    """An LSTM (:class:`~rlmem.cells.lstm.LSTM`) over a chunk: the step ``torch.lstm_cell``
    with the same weights.

    Shapes:
        - x: ``(T, B, input_size)``; resets ``(T, B)``
        - weights: ``W_ih (4H, input_size), W_hh (4H, H), b_ih (4H,), b_hh (4H,)``, as
          ``nn.LSTM``'s ``all_weights[0]``
        - state: a NamedTuple ``(h, c)``, each ``(B, H)``; returned of the same type
        - train: the kernel's training mode (cuDNN keeps what its backward needs)
    """
    # A chunk that no reset cuts is one call of torch's kernel either way, and that kernel is
    # the faster of the two there (docs/performance.md#compiled-lstm): the compiled loop only
    # runs a chunk that some item's reset cuts.
    if _COMPILED_LSTM.get() and x.device.type == "cpu" and any(steps_with_resets(resets)[1:]):
        whole = lstm_chunk(x, (weights[0], weights[1], weights[2], weights[3]), state[0],
                           state[1], resets)
        if whole is not None:
            y, h, c = whole
            return ScanResult(y, state._make([h, c]), {})

    def run(segment: Tensor, state: S) -> tuple[Tensor, S]:
        hx = (state[0].unsqueeze(0).contiguous(), state[1].unsqueeze(0).contiguous())
        y, h, c = torch.lstm(segment, hx, list(weights), True, 1, 0.0, train, False, False)
        return y, state._make([h.squeeze(0), c.squeeze(0)])

    return scan_segments(run, x, state, resets)


def gru(x: Tensor, weights: Sequence[Tensor], state: S, resets: Tensor, *,
        train: bool) -> ScanResult:
    """A GRU (:class:`~rlmem.cells.gru.GRU`) over a chunk: the step ``torch.gru_cell`` with the
    same weights.

    Shapes:
        - x: ``(T, B, input_size)``; resets ``(T, B)``
        - weights: ``W_ih (3H, input_size), W_hh (3H, H), b_ih (3H,), b_hh (3H,)``, as
          ``nn.GRU``'s ``all_weights[0]``
        - state: a one-field NamedTuple, ``h`` ``(B, H)``; returned of the same type
        - train: the kernel's training mode (cuDNN keeps what its backward needs)
    """
    def run(segment: Tensor, state: S) -> tuple[Tensor, S]:
        y, h = torch.gru(segment, state[0].unsqueeze(0).contiguous(), list(weights), True, 1,
                         0.0, train, False, False)
        return y, state._make([h.squeeze(0)])

    return scan_segments(run, x, state, resets)


def scan_segments(run: Callable[[Tensor, Any], tuple[Tensor, Any]], x: Tensor, state: Any,
                  resets: Tensor) -> ScanResult:
    """Equivalent to :func:`rlmem.cells.time_loop.scan`, with one fused call per reset-free segment.

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

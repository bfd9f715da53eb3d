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

from rlmem.cells._engines.lstm_chunk import lstm_chunk, takes_whole_chunk
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
    # the faster of the two there but for small chunks under autograd with the blocked
    # products (takes_whole_chunk; docs/performance.md#compiled-lstm).
    if (_COMPILED_LSTM.get() and x.device.type == "cpu"
            and (takes_whole_chunk(x, weights[1].shape[1])
                 or any(steps_with_resets(resets)[1:]))):
        whole = lstm_chunk(x, (weights[0], weights[1], weights[2], weights[3]), state[0],
                           state[1], resets)
        if whole is not None:
            y, h, c = whole
            return ScanResult(y, state._make([h, c]), {})

    def kernel(segment: Tensor, hx: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return tuple(torch.lstm(segment, hx, list(weights), True, 1, 0.0, train, False, False))

    def run(segment: Tensor, state: S) -> tuple[Tensor, S]:
        hx = (state[0].unsqueeze(0).contiguous(), state[1].unsqueeze(0).contiguous())
        y, h, c = in_item_slices(kernel, segment, hx, gates=4 * weights[1].shape[1])
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
    def kernel(segment: Tensor, hx: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        return tuple(torch.gru(segment, hx[0], list(weights), True, 1, 0.0, train, False,
                               False))

    def run(segment: Tensor, state: S) -> tuple[Tensor, S]:
        y, h = in_item_slices(kernel, segment, (state[0].unsqueeze(0).contiguous(),),
                              gates=3 * weights[1].shape[1])
        return y, state._make([h.squeeze(0)])

    return scan_segments(run, x, state, resets)


KERNEL_GATE_BYTES = 1 << 30
"""The most bytes of one step's gates (``B × gates`` values) given to one call of the fused
kernel. oneDNN's CPU LSTM fails to create its primitive ("could not create a primitive") once
they reach about 2 GiB: about 2M items at hidden size 64, 1M at 128, reached by the acting step
of a run of that many envs."""


def in_item_slices(kernel: Callable[[Tensor, tuple[Tensor, ...]], tuple[Tensor, ...]],
                   segment: Tensor, hx: tuple[Tensor, ...], gates: int) -> tuple[Tensor, ...]:
    """``kernel(segment, hx)`` (its output, then its states, each with the items on dim 1),
    with at most :data:`KERNEL_GATE_BYTES` of gates a call: a larger batch runs in slices of
    items, whose sequences are independent of each other's, and is joined after. The same
    function; a batch below the bound is one call, as without it.

    Shapes:
        - segment: ``(T, B, input_size)``; hx: each ``(1, B, H)``; gates: the kernel's gate
          values per item and step (LSTM ``4H``, GRU ``3H``)
    """
    items = max(1, KERNEL_GATE_BYTES // (gates * segment.element_size()))
    batch = segment.shape[1]
    if batch <= items:
        return kernel(segment, hx)
    parts = [kernel(segment[:, start:start + items],
                    tuple(state[:, start:start + items] for state in hx))
             for start in range(0, batch, items)]
    return tuple(torch.cat(pieces, dim=1) for pieces in zip(*parts, strict=True))


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

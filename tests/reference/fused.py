"""Running a fused multi-step kernel (cuDNN/oneDNN LSTM and GRU) under per-environment resets."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from reference.base import reset_state


def scan_segments(run: Callable[[Tensor, Any], tuple[Tensor, Any]], x: Tensor, state: Any,
                  resets: Tensor) -> tuple[Tensor, Any, dict[str, Tensor]]:
    """Equivalent to :func:`rlmem.cells.base.scan`, with one fused call per reset-free segment.

    Time is cut at every step where any batch item resets; between the cuts no state is touched
    from outside, so ``run(x[start:end], state)`` can process the whole segment in one kernel.
    A chunk without resets inside it is a single call.

    Shapes:
        - x: ``(T, B, *)``; resets: ``(T, B)`` bool
        - run: ``(segment of x, state) -> (segment of y, state)``
    """
    steps = x.shape[0]
    any_reset = resets.any(dim=1)
    cuts = [0, *(torch.nonzero(any_reset[1:]).flatten() + 1).tolist(), steps]
    first_reset = bool(any_reset[0])
    outputs = []
    for start, end in itertools.pairwise(cuts):
        if start > 0 or first_reset:
            state = reset_state(state, resets[start])
        y, state = run(x[start:end], state)
        outputs.append(y)
    return torch.cat(outputs) if len(outputs) > 1 else outputs[0], state, {}

"""Which path an attentive cell's chunk takes: its engine, or its step.

Shared by the engines of the relevancy-screening cells (:mod:`.screened`) and of MemLSTM
(:mod:`.full_attention`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import torch
from torch import Tensor

from rlmem.cells._engines.graph import needs_graph

_R = TypeVar("_R")

STEP_PATH_STEPS = 4
"""Without autograd, chunks shorter than this (the rollout's single steps) run the cell's own
step through :func:`rlmem.cells.time_loop.scan`: an engine's setup costs more than it saves
there."""


def outside_autocast(scan_fn: Callable[[Tensor, Any, Tensor], _R], x: Tensor, state: Any,
                     resets: Tensor, dtype: torch.dtype) -> _R | None:
    """Run ``scan_fn`` in ``dtype`` with autocast off, if autocast is on; else None.

    The engines are bound by the number of their ops, not by their precision, so under
    autocast they run in the parameters' dtype instead (their output is in that dtype).
    """
    if not torch.is_autocast_enabled(x.device.type):
        return None
    state = type(state)(*(value.to(dtype) if value.is_floating_point() else value
                          for value in state))
    with torch.autocast(x.device.type, enabled=False):
        return scan_fn(x.to(dtype), state, resets)


def wants_engine(steps: int, tensors: Iterable[Tensor | None]) -> bool:
    """Whether a chunk of ``steps`` steps over ``tensors`` should run through an engine."""
    return steps >= STEP_PATH_STEPS or needs_graph(tensors)


TIME_LIMIT = {torch.float32: 2 ** 24, torch.float64: 2 ** 53}
"""Episode steps up to which a slot's step is exact in its float column, per dtype; the engine
takes only these dtypes."""


"""The reset-aware time loop: a cell's state, the reset rule, and :func:`scan`.

``scan(step)`` is every cell's specification (:mod:`rlmem.cells.base` holds the cell
contract). This module knows no cell: the engines (:mod:`rlmem.cells._engines`) import it
for :class:`ScanResult`, the reset rule of the state (:func:`reset_state`) and
:func:`episode_time`, and a cell's :meth:`~rlmem.cells.base.Cell._scan` runs :func:`scan`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import torch
from torch import Tensor

from rlmem.cells.host_reads import any_reset, steps_with_resets
from rlmem.cells.resets import reset_where

State = NamedTuple
"""A cell's recurrent state: a NamedTuple of tensors with the batch on dim 0 of each."""

S = TypeVar("S", bound=State)
"""A cell's state type, kept through a function (rebuilt with ``_make``)."""


StepFn = Callable[[Tensor, Any], tuple[Tensor, Any, dict[str, Tensor]]]
"""``step(x_t, state) -> (y_t, new_state, per-step traces)``: one time step of a cell."""


def reset_state(state: S, reset: Tensor) -> S:
    """Return ``state`` with the entries of the batch items where ``reset`` is true set to zero:
    the reset rule of :mod:`rlmem.cells.resets`, field by field.

    Shapes:
        - reset: ``(B,)`` bool
        - each field of state: ``(B, ...)``
    """
    fields = []
    for value in state:
        mask = reset.view(reset.shape + (1,) * (value.dim() - 1))
        fields.append(reset_where(value, mask))
    return state._make(fields)


class ScanResult(NamedTuple):
    """What a time loop returns: :func:`scan`, an engine (:meth:`Cell.fast_scan`), and so
    :meth:`Cell._scan`."""

    output: Tensor
    """``(T, B, *)``: the output of every step."""
    state: Any
    """The state after the last step."""
    traces: dict[str, Tensor]
    """The per-step traces of :meth:`Cell.step`, each stacked on a leading time dimension."""


def scan(step: StepFn, x: Tensor, state: State, resets: Tensor) -> ScanResult:
    """Run ``step`` over time, re-initialising the state of each batch item where it resets.

    This is the one time loop of rlmem, and ``scan(cell.step, cell.project_input(x), ...)`` is
    every cell's specification: each engine is tested against it (``tests/cells/test_engines.py``).

    Shapes:
        - x: ``(T, B, *)``
        - resets: ``(T, B)`` bool, ``resets[t, b]`` resets ``b`` before ``x[t, b]``
        - returns ``y`` of shape ``(T, B, *)``, the final state, and the per-step traces of
          ``step`` stacked on a new leading time dimension.
    """
    if x.shape[0] == 1:
        # A rollout's single step: its outputs get their time dimension as views (they may
        # share memory with the state), which costs less than stacked copies.
        if any_reset(resets):
            state = reset_state(state, resets[0])
        y, state, trace = step(x[0], state)
        return ScanResult(y.unsqueeze(0), state,
                          {key: value.unsqueeze(0) for key, value in trace.items()})
    # One host read for the whole sequence instead of one per step.
    resetting = steps_with_resets(resets)
    outputs: list[Tensor] = []
    traces: dict[str, list[Tensor]] = {}
    for t in range(x.shape[0]):
        if resetting[t]:
            state = reset_state(state, resets[t])
        y, state, trace = step(x[t], state)
        outputs.append(y)
        for key, value in trace.items():
            traces.setdefault(key, []).append(value)
    stacked = {key: torch.stack(values) for key, values in traces.items()}
    return ScanResult(torch.stack(outputs), state, stacked)


def episode_time(t0: Tensor, resets: Tensor) -> Tensor:
    """``(T, B)`` long: steps since the episode started at each step, before that step.

    Step ``k`` of item ``b`` is ``k - r`` after its last reset ``r ≤ k``, else ``t0[b] + k``
    (``t0``: the steps its episode had consumed before the chunk, ``(B,)`` long).
    """
    steps = resets.shape[0]
    index = torch.arange(steps, device=resets.device).unsqueeze(1)
    last = torch.where(resets, index, -1).cummax(dim=0).values
    return torch.where(last >= 0, index - last, t0.unsqueeze(0) + index)

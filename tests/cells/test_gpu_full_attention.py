"""MemLSTM's Triton kernels (:mod:`rlmem.cells._engines.gpu.full_attention`) beyond the
equality table: a realistic size, and a chunk too wide for them.

``tests/cells/test_engines.py`` proves the kernels equal to the cell's ``scan(step)`` at a tiny
size (hidden 6, batch 5); here the same in float64 (outputs, states, traces, gradients, with
resets) at hidden 32 and batch 8, over 20 steps in chunks of 1, 8 and 11 (the incoming memory
read from the second chunk on), and a rollout's steps likewise; and a chunk whose window
exceeds what one program holds runs the Python loops, says so, and still equals the step.
"""

from __future__ import annotations

import logging

import pytest
import torch
from reference.equivalence import assert_matches_reference, assert_matches_without_grad, use_loops

from rlmem.cells import Cell, make_cell
from rlmem.cells._engines import gpu


def _engine_and_step(hidden: int, monkeypatch: pytest.MonkeyPatch,
                     capacity: int = 32) -> tuple[Cell, Cell]:
    cells = []
    for _ in range(2):
        torch.manual_seed(0)
        cells.append(make_cell("memlstm", input_size=5, hidden_size=hidden, capacity=capacity))
    engine, step = cells
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)  # scan(step)
    return engine, step


def _record(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether :func:`gpu.runs` said yes, for each chunk it was asked about."""
    runs = gpu.runs
    said: list[bool] = []

    def recorded(like: torch.Tensor, name: str) -> bool:
        said.append(runs(like, name))
        return said[-1]

    monkeypatch.setattr(gpu, "runs", recorded)
    return said


@pytest.mark.slow
def test_memlstm_kernels_equal_the_step_at_a_realistic_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("triton", monkeypatch)
    engine, step = _engine_and_step(32, monkeypatch)
    said = _record(monkeypatch)
    assert_matches_reference(engine, step, steps=20, batch=8, chunks=(1, 9), warmup=5,
                             traces=True)
    assert said and all(said), "the kernels did not compute every chunk"


@pytest.mark.slow
def test_memlstm_rollout_step_kernel_equals_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollout's steps (no autograd, one step a call) through ``rollout_step`` at hidden 32,
    batch 8 and capacity 16 over 30 steps: the memory fills, overflows and resets."""
    use_loops("triton", monkeypatch)
    engine, step = _engine_and_step(32, monkeypatch, capacity=16)
    said = _record(monkeypatch)
    assert_matches_without_grad(engine, step, chunk=1, steps=24, warmup=6, batch=8)
    assert said and all(said), "the kernels did not compute every step"


def test_a_window_too_wide_for_the_kernels_runs_the_python_loops(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    use_loops("triton", monkeypatch)
    from rlmem.cells._engines.gpu import full_attention as kernels
    monkeypatch.setattr(kernels, "MOST", 1)  # every window is too wide
    engine, step = _engine_and_step(4, monkeypatch)
    kernels_ran = []
    monkeypatch.setattr(kernels, "forward_loop",
                        lambda *args: kernels_ran.append(1))  # must not be reached
    gpu.fallback.cache_clear()
    with caplog.at_level(logging.WARNING, logger=gpu.__name__):
        assert_matches_reference(engine, step, steps=12, batch=3, chunks=(1, 4), warmup=2)
    assert not kernels_ran
    assert any("exceeds what one program holds" in message for message in caplog.messages)

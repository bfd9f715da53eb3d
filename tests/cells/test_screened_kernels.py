"""Relevancy screening's Triton kernels (:mod:`rlmem.cells._engines.gpu.screened`) beyond the
equality table of ``test_engines.py``: a realistic size, a program per batch item (the GPU's
blocks), and the fallback above the kernels' limits. Through Triton's interpreter on the CPU,
in float64, against the cell's ``scan(step)``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from reference.equivalence import assert_matches_reference, use_loops

from rlmem.cells import make_cell
from rlmem.cells._engines import gpu
from rlmem.cells.screening import RelevancyScreening, Screening


def _pair(name: str, hidden: int, **options: Any) -> tuple[RelevancyScreening, RelevancyScreening]:
    """The cell twice from one seed, the second running its step (the reference); attention
    sharpened so that later states enter R and replace members."""
    cells = []
    for _ in range(2):
        torch.manual_seed(0)
        cell = make_cell(name, input_size=3, hidden_size=hidden, **options)
        assert isinstance(cell, RelevancyScreening)
        with torch.no_grad():
            cell.attention.score.weight.mul_(30.0)
        cells.append(cell)
    return cells[0], cells[1]


def _kernel_chunks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, per chunk, whether the screened engine's kernels took it."""
    runs, taken = gpu.runs, []

    def recorded(like: torch.Tensor, engine: str) -> bool:
        result = runs(like, engine)
        taken.append(result)
        return result

    monkeypatch.setattr(gpu, "runs", recorded)
    return taken


@pytest.mark.slow
def test_kernels_equal_the_step_at_a_realistic_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hidden 32, ν = ρ = 5, batch 8, 20 steps in chunks, with resets: outputs, states, traces
    and gradients."""
    use_loops("triton", monkeypatch)
    fast, step = _pair("relstm", 32, short_term=5, relevant=5)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    taken = _kernel_chunks(monkeypatch)
    assert_matches_reference(fast, step, steps=20, batch=8, chunks=(1, 9), traces=True)
    assert taken and all(taken)


@pytest.mark.parametrize("name", ["relstm", "relrnn"])
def test_a_program_per_batch_item(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels with one batch item per program, as on a GPU (the interpreter's default
    takes a block of items), under normalised screening."""
    from rlmem.cells._engines.gpu import screened as kernels

    use_loops("triton", monkeypatch)
    monkeypatch.setattr(kernels, "INTERPRETER_BATCH_BLOCK", 1)
    fast, step = _pair(name, 5, short_term=2, relevant=2, screening=Screening.normalised)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    taken = _kernel_chunks(monkeypatch)
    assert_matches_reference(fast, step, steps=7, batch=2, chunks=(3,), warmup=4)
    assert taken and all(taken)


def test_above_the_kernels_limits_the_python_loops_run(monkeypatch: pytest.MonkeyPatch,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    """A hidden size above :data:`MAX_HIDDEN` runs the Python loops, says so once, and still
    equals the step."""
    from rlmem.cells._engines.gpu import screened as kernels

    use_loops("triton", monkeypatch)
    monkeypatch.setattr(kernels, "MAX_HIDDEN", 4)
    gpu.fallback.cache_clear()
    fast, step = _pair("relstm", 6, short_term=2, relevant=2)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    monkeypatch.setattr(kernels, "forward_loop", None)  # would fail if called
    with caplog.at_level(logging.WARNING, logger=gpu.__name__):
        assert_matches_reference(fast, step, steps=9, batch=3, chunks=(4,), warmup=4)
    lines = [record.getMessage() for record in caplog.records]
    assert lines == ["rlmem: screened runs its Python loops, not its Triton kernels: hidden "
                     "size 6 above the kernels' 4"]
    gpu.fallback.cache_clear()

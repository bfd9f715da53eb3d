"""Relevancy screening's Triton kernels (:mod:`rlmem.cells._engines.gpu.screened`) beyond the
equality table of ``test_engines.py``: a realistic size, a program per batch item (the GPU's
blocks), and the fallback above the kernels' limits. Through Triton's interpreter on the CPU,
in float64, against the cell's ``scan(step)``."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from reference.equivalence import (
    assert_matches_reference,
    assert_matches_without_grad,
    use_loops,
)

from rlmem.cells import make_cell
from rlmem.cells._engines import gpu
from rlmem.cells.screening import RelevancyScreening, Screening


def _pair(name: str, hidden: int, sharpen: float = 30.0,
          **options: Any) -> tuple[RelevancyScreening, RelevancyScreening]:
    """The cell twice from one seed, the second running its step (the reference); attention
    sharpened so that later states enter R and replace members."""
    cells = []
    for _ in range(2):
        torch.manual_seed(0)
        cell = make_cell(name, input_size=3, hidden_size=hidden, **options)
        assert isinstance(cell, RelevancyScreening)
        with torch.no_grad():
            cell.attention.score.weight.mul_(sharpen)
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
    takes a block of items): chunks under normalised screening, and a rollout's steps
    (Algorithm 1's)."""
    from rlmem.cells._engines.gpu import screened as kernels

    use_loops("triton", monkeypatch)
    monkeypatch.setattr(kernels, "INTERPRETER_BATCH_BLOCK", 1)
    fast, step = _pair(name, 5, short_term=2, relevant=2, screening=Screening.normalised)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    taken = _kernel_chunks(monkeypatch)
    assert_matches_reference(fast, step, steps=7, batch=2, chunks=(3,), warmup=4)
    fast, step = _pair(name, 5, short_term=2, relevant=2)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    assert_matches_without_grad(fast, step, chunk=1, steps=6, warmup=2, batch=2)
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


def _run(cell: RelevancyScreening, x: torch.Tensor, resets: torch.Tensor) -> list[torch.Tensor]:
    """Outputs, final state and every gradient of one chunk under autograd, then a rollout
    step without it."""
    cell.zero_grad()
    x = x.clone().requires_grad_()
    output, state = cell(x, None, resets)
    (output * torch.linspace(-1, 1, output.numel(), device=x.device).view_as(output)
     ).sum().backward()
    with torch.no_grad():
        step, _ = cell(x[:1].detach(), state, resets[:1])
    assert x.grad is not None
    return [output, step, *(f for f in state if f.is_floating_point()), x.grad,
            *(p.grad for p in cell.parameters() if p.grad is not None)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
@pytest.mark.parametrize("screening", list(Screening))
@pytest.mark.parametrize("hidden", [128, 256])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", ["relstm", "relrnn"])
def test_kernels_equal_the_python_loops_on_cuda(name: str, dtype: torch.dtype, hidden: int,
                                                screening: Screening,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU at the copy benchmark's size (hidden 128, ν = ρ = 10: the largest blocks)
    and at :data:`MAX_HIDDEN`, the kernels against the Python loops, with resets, in both
    dtypes and both screenings (the rollout step of normalised screening through the chunk's
    kernels); attention not sharpened: float32's rounding must not flip a near tie of the
    screening."""
    fast, _ = _pair(name, hidden, sharpen=1.0, short_term=10, relevant=10,
                    screening=screening)
    fast = fast.to("cuda", dtype)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(40, 16, 3, generator=generator).to("cuda", dtype)
    resets = (torch.rand(40, 16, generator=generator) < 0.05).to("cuda")
    results = []
    for setting in ("auto", "0"):
        monkeypatch.setenv(gpu.VARIABLE, setting)
        taken = _kernel_chunks(monkeypatch)
        results.append(_run(fast, x, resets))
        assert any(taken) == (setting == "auto")
    tolerance = 1e-9 if dtype == torch.float64 else 2e-4
    for kernel, loop in zip(*results, strict=True):
        torch.testing.assert_close(kernel, loop, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("name", ["relstm", "relrnn"])
def test_short_chunks_without_grad_take_the_kernels(name: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Without autograd, the chunks too short for the engine on the CPU still take the
    kernels where they run (:func:`kernels_take_short_chunk`): a rollout's steps under
    normalised screening, and chunks of 2 and 3 steps under Algorithm 1's."""
    from rlmem.cells._engines.gpu import screened as kernels

    use_loops("triton", monkeypatch)
    forward_loop, chunks = kernels.forward_loop, []

    def counted(*args: Any, **options: Any) -> Any:
        chunks.append(args[0].shape[0])
        return forward_loop(*args, **options)

    monkeypatch.setattr(kernels, "forward_loop", counted)
    for chunk, screening in ((1, Screening.normalised), (2, Screening.algorithm1),
                             (3, Screening.normalised)):
        fast, step = _pair(name, 5, short_term=2, relevant=2, screening=screening)
        monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
        chunks.clear()
        calls = assert_matches_without_grad(fast, step, chunk=chunk, steps=5, warmup=1,
                                            batch=3)
        assert len(chunks) == calls and max(chunks) == chunk, (chunk, chunks)

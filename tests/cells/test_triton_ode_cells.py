"""TARNN's, iRNN's and ERNN's Triton kernels (``rlmem/cells/_engines/gpu``) beyond the
equality table of ``test_engines.py``, through Triton's interpreter on the CPU (on CUDA where
a GPU is present):

- float32, where the kernels' products are ``tl.dot`` (float64, the table's dtype, runs them
  as sums of products), against the Python loops in float32;
- a realistic size in float64 against the cell's ``scan(step)``, more than one block of batch
  rows with a partial one;
- above the kernels' hidden-size cap: the Python loops run, one log line says so, and the
  result still equals ``scan(step)``.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
from cells.test_engines import count_kernel_chunks
from reference.equivalence import assert_matches_reference, random_resets, use_loops

from rlmem.cells import Cell, make_cell
from rlmem.cells._engines import gpu

CELLS: list[tuple[str, dict[str, Any]]] = [
    ("tarnn", {"A": "coupled", "K": 3}),
    ("irnn", {"K": 2, "nonlinearity": "tanh", "eta": 0.3}),
    ("ernn", {"K": 2, "eta": 0.4}),
]
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA"))]


def build(name: str, options: dict[str, Any], hidden: int, inputs: int = 3) -> Cell:
    torch.manual_seed(0)
    return make_cell(name, input_size=inputs, hidden_size=hidden, **options)


def outputs_and_gradients(cell: Cell, x: torch.Tensor, resets: torch.Tensor
                          ) -> list[torch.Tensor]:
    """A chunk from a non-zero state: the outputs, the final state, and the gradients of a
    fixed projection of both with respect to the inputs, the state and every parameter."""
    generator = torch.Generator().manual_seed(1)
    batch = x.shape[1]
    h0 = torch.randn(batch, cell.hidden_size, generator=generator).to(x)
    x, h0 = x.clone().requires_grad_(), h0.requires_grad_()
    start = cell.initial_state(batch, device=x.device, dtype=x.dtype)._make([h0])
    output, state = cell(x, start, resets)
    objective = ((output * torch.randn(output.shape, generator=generator).to(x)).sum()
                 + (state[0] * torch.randn(h0.shape, generator=generator).to(x)).sum())
    grads = torch.autograd.grad(objective, [x, h0, *cell.parameters()])
    return [output.detach(), state[0].detach(), *grads]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(("name", "options"), CELLS, ids=[name for name, _ in CELLS])
def test_float32_kernels_equal_the_python_loops(name: str, options: dict[str, Any],
                                                device: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cell = build(name, options, hidden=20).to(device)
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(6, 18, 3, generator=generator).to(device)
    resets = random_resets(6, 18, generator).to(device)
    taken = count_kernel_chunks(monkeypatch)
    use_loops("python", monkeypatch, device)
    want = outputs_and_gradients(cell, x, resets)
    use_loops("triton", monkeypatch, device)
    got = outputs_and_gradients(cell, x, resets)
    assert taken == [name]
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", [pytest.param("cpu", marks=pytest.mark.slow), *DEVICES[1:]])
@pytest.mark.parametrize(("name", "options"), CELLS, ids=[name for name, _ in CELLS])
def test_kernels_equal_the_step_at_a_realistic_size(name: str, options: dict[str, Any],
                                                    device: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("triton", monkeypatch, device)
    taken = count_kernel_chunks(monkeypatch)
    engine, step = build(name, options, hidden=32, inputs=5), build(name, options, 32, 5)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)  # scan(step)
    assert_matches_reference(engine, step, steps=20, batch=21, chunks=(1, 9), warmup=3,
                             traces=True, device=device)
    assert taken and set(taken) == {name}


@pytest.mark.parametrize(("name", "options"), CELLS, ids=[name for name, _ in CELLS])
def test_above_the_cap_the_python_loops_run(name: str, options: dict[str, Any],
                                            monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    use_loops("triton", monkeypatch)
    taken = count_kernel_chunks(monkeypatch)
    from rlmem.cells._engines.gpu import irnn, tarnn  # imports Triton: after use_loops

    cap = (tarnn if name == "tarnn" else irnn).MAX_SIZE
    engine, step = build(name, options, cap + 2, 2), build(name, options, cap + 2, 2)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    gpu.fallback.cache_clear()
    with caplog.at_level(logging.WARNING, logger=gpu.__name__):
        assert_matches_reference(engine, step, steps=3, batch=2, chunks=(1,), warmup=1)
    assert set(taken) == {name}  # gpu.runs said yes; the engine then declined
    assert any(f"above the kernels' {cap}" in record.getMessage()
               and name in record.getMessage() for record in caplog.records)

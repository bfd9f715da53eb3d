"""The GRU's compiled chunk (:mod:`rlmem.cells._engines.gru_chunk`): float32 within rounding of
float64, gradients of only some outputs, and the CPU's GRU taking it. Its equality with the
cell's step in float64 is ``tests/cells/test_engines.py``'s (the gru rows, each with the compiled
loops and without)."""

from __future__ import annotations

import pytest
import torch
from reference.equivalence import random_resets

from rlmem.cells import gru as gru_module
from rlmem.cells import make_cell
from rlmem.cells._engines import compiled, fused_rnn, gru_chunk
from rlmem.cells.time_loop import scan


@pytest.fixture(autouse=True)
def _loops() -> None:
    if compiled.ops(torch.zeros(1)) is None:
        pytest.skip("the compiled loops cannot be built here")


@pytest.mark.parametrize(("steps", "items", "hidden"), [(7, 5, 6), (16, 16, 64), (3, 9, 40)])
def test_float32_within_rounding_of_float64(steps: int, items: int, hidden: int) -> None:
    """The chunk in float32 (its products in the blocked loop where the CPU has it: rows in
    groups of 8 and a remainder, columns in blocks of 32 and a masked rest) against the same
    chunk in float64: outputs, final state and every gradient, under resets."""
    torch.manual_seed(1)
    weights = [weight.detach() for weight in torch.nn.GRU(5, hidden).all_weights[0]]
    x, h0 = torch.randn(steps, items, 5), torch.randn(items, hidden)
    resets = random_resets(steps, items, torch.Generator().manual_seed(2))
    grads = torch.randn(steps, items, hidden), torch.randn(items, hidden)
    results = []
    for dtype in (torch.float32, torch.float64):
        inputs = [tensor.to(dtype, copy=True).requires_grad_() for tensor in (x, h0, *weights)]
        layout = gru_chunk.GRULayout.of(*inputs[2:])
        whole = gru_chunk.gru_chunk(inputs[0], layout, inputs[1], resets)
        assert whole is not None
        torch.autograd.backward(list(whole), [grad.to(dtype) for grad in grads])
        results.append([*whole, *(tensor.grad for tensor in inputs)])
    for single, double in zip(*results, strict=True):
        assert single is not None and double is not None
        torch.testing.assert_close(single.double(), double, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("used", ["outputs", "final state"])
def test_a_gradient_from_one_output_alone(used: str) -> None:
    """Backpropagating the outputs alone, or the final state alone (the other's gradient is
    None inside the node), gives what the step-by-step reference gives."""
    torch.manual_seed(3)
    cell = make_cell("gru", input_size=4, hidden_size=8).double()
    x = torch.randn(6, 3, 4, dtype=torch.float64, requires_grad=True)
    resets = random_resets(6, 3, torch.Generator().manual_seed(4))
    state = cell.initial_state(3, dtype=torch.float64)
    grads = []
    fast = cell.fast_scan(x, state, resets)
    assert fast is not None
    for result in (fast, scan(cell.step, x, state, resets)):
        loss = result.output.sum() if used == "outputs" else result.state.h.sum()
        grads.append(torch.autograd.grad(loss, [x, *cell.parameters()]))
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_the_cpus_gru_takes_the_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the CPU the GRU's engine is one call of the chunk, whatever the resets; torch's
    kernel runs only where the compiled loops do not."""
    calls: list[int] = []
    chunk = gru_module.gru_chunk

    def counted(x: torch.Tensor, *args: object) -> object:
        calls.append(x.shape[0])
        return chunk(x, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(gru_module, "gru_chunk", counted)
    monkeypatch.setattr(fused_rnn, "gru", lambda *args, **kwargs: pytest.fail("torch's kernel"))
    cell = make_cell("gru", input_size=3, hidden_size=5)
    resets = torch.zeros(9, 4, dtype=torch.bool)
    resets[4, 1] = True
    cell(torch.randn(9, 4, 3), None, resets)
    assert calls == [9]

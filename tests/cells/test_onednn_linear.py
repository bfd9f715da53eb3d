"""oneDNN's products for the cells' large projections (``rlmem.cells._engines.onednn_linear``):
the same function as ``functional.linear`` within float32 rounding, forward and backward;
``functional.linear`` itself, bit for bit, wherever they are not taken; and taken where the
supervised trainer trains."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from supervised_runs import run_supervised
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells import make_cell
from rlmem.cells._engines import compiled, onednn_linear
from rlmem.cells._engines.onednn_linear import MIN_PRODUCT, Linear, linear, onednn_products

pytestmark = pytest.mark.skipif(not onednn_linear._AVAILABLE,
                                reason="this torch has no oneDNN linear op")


def products_taken(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """Records the shape of every product taken in oneDNN from now on."""
    taken: list[tuple[int, ...]] = []
    product = onednn_linear._product

    def spy(a: Tensor, b: Tensor, bias: Tensor | None = None) -> Tensor:
        taken.append((*a.shape, b.shape[0]))
        return product(a, b, bias)

    monkeypatch.setattr(onednn_linear, "_product", spy)
    return taken


def gradients(x: Tensor, weight: Tensor, bias: Tensor, grad: Tensor) -> list[Tensor]:
    """``linear``'s output and the gradients of x, the weight and the bias."""
    inputs = [value.detach().clone().requires_grad_(True) for value in (x, weight, bias)]
    out = linear(*inputs)
    out.backward(grad)
    return [out.detach(), *(value.grad for value in inputs if value.grad is not None)]


@pytest.mark.parametrize("blocked", [True, False], ids=["blocked dW", "oneDNN dW"])
@pytest.mark.parametrize("rows", [8192, 512])
def test_a_large_product_is_oneDNNs_and_matches_functional_linear(
        rows: int, blocked: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The output and the input's gradient in oneDNN; the weight's in the compiled loops'
    blocked product where the CPU runs it (else oneDNN's, as here when told it does not)."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(4, rows // 4, 128), torch.randn(256, 128), torch.randn(256)
    grad = torch.randn(4, rows // 4, 256)
    assert rows * 128 * 256 >= MIN_PRODUCT
    reference = gradients(x, weight, bias, grad)
    if not blocked:
        monkeypatch.setattr(compiled, "_blocked_available", lambda native: False)
    elif compiled.blocked_ops(x) is None:
        pytest.skip("the blocked product does not run on this CPU")
    taken = products_taken(monkeypatch)
    with onednn_products():
        fast = gradients(x, weight, bias, grad)
    weight_gradient = [] if blocked else [(128, rows, 256)]  # dW^T
    assert taken == [(rows, 128, 256), (rows, 256, 128), *weight_gradient]  # y, dx
    for name, want, got in zip(("output", "dx", "dW", "db"), reference, fast, strict=True):
        assert got.shape == want.shape, name
        # float32 rounding of sums over up to `rows` terms, in another order
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item(),
                                   msg=name)


@pytest.mark.parametrize("case", ["outside", "small", "float64"])
def test_elsewhere_it_is_functional_linear_bit_for_bit(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(1)
    rows = 16 if case == "small" else 4096
    dtype = torch.float64 if case == "float64" else torch.float32
    x, weight = torch.randn(rows, 64, dtype=dtype), torch.randn(128, 64, dtype=dtype)
    bias = torch.randn(128, dtype=dtype)
    taken = products_taken(monkeypatch)
    with onednn_products(case != "outside"):
        got = linear(x, weight, bias)
    assert torch.equal(got, functional.linear(x, weight, bias))
    assert taken == []


def test_without_a_bias_and_without_gradients(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(4)
    x, weight = torch.randn(2, 2048, 64), torch.randn(128, 64)
    taken = products_taken(monkeypatch)
    with onednn_products(), torch.no_grad():
        got = linear(x, weight)
    assert taken == [(4096, 64, 128)]
    torch.testing.assert_close(got, functional.linear(x, weight), rtol=1e-5, atol=1e-5)


def test_a_gradient_of_any_layout_reaches_oneDNN_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gradient of a sum is a zero-stride expand, which oneDNN reads through a path
    hundreds of times slower (DeltaNet's training step, whose output is a product, took 22 ms a
    step in ``benchmarks/cell_speed.py`` against 0.6 ms): it is copied dense first."""
    torch.manual_seed(5)
    x, weight, bias = torch.randn(4096, 128), torch.randn(256, 128), torch.randn(256)
    given: list[bool] = []
    dense = onednn_linear._dense

    def spy(matrix: Tensor) -> Tensor:
        result = dense(matrix)
        given.append(matrix.is_contiguous() or matrix.t().is_contiguous())
        assert result.is_contiguous() or result.t().is_contiguous()
        return result

    monkeypatch.setattr(onednn_linear, "_dense", spy)
    reference = gradients(x, weight, bias, torch.ones(4096, 256))
    inputs = [value.clone().requires_grad_(True) for value in (x, weight, bias)]
    with onednn_products():
        out = linear(*inputs)
    out.sum().backward()
    assert not all(given)  # the expanded gradient was among them
    for want, got in zip(reference[1:], (value.grad for value in inputs), strict=True):
        assert got is not None
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())


def test_the_module_keeps_nn_linears_weights_and_state_dict() -> None:
    torch.manual_seed(2)
    plain = nn.Linear(32, 16)
    ours = Linear(32, 16)
    ours.load_state_dict(plain.state_dict())
    assert list(ours.state_dict()) == list(plain.state_dict())
    x = torch.randn(8, 32)
    assert torch.equal(ours(x), plain(x))


@pytest.mark.parametrize("name", ["ffm", "lru", "deltanet", "gtrxl", "relstm", "relrnn", "memlstm",
                                  "tarnn", "sarnn", "ernn", "irnn"])
def test_a_cells_training_step_matches_with_oneDNNs_products(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A whole sequence with resets through each cell that takes them: outputs, final state
    and every weight's gradient within float32 rounding of the cell without them."""
    torch.manual_seed(3)
    cell = make_cell(name, input_size=64, hidden_size=64)
    x = torch.randn(48, 32, 64)
    resets = torch.zeros(48, 32, dtype=torch.bool)
    resets[20, :5] = resets[33, 7] = True

    def run() -> tuple[list[Tensor], list[Tensor]]:
        cell.zero_grad(set_to_none=True)
        output, state = cell(x, cell.initial_state(32), resets)
        (output.square().mean() + sum(value.float().sum() for value in state)).backward()
        weights = [parameter.grad for parameter in cell.parameters()
                   if parameter.grad is not None]
        return [output.detach(), *[value.detach() for value in state]], weights

    reference = run()
    taken = products_taken(monkeypatch)
    with onednn_products():
        fast = run()
    assert taken, f"{name} took no product in oneDNN"
    for part, want_all, got_all in zip(("output/state", "gradients"), reference, fast,
                                       strict=True):
        for want, got in zip(want_all, got_all, strict=True):
            if not want.is_floating_point():  # gtrxl's validity mask
                assert torch.equal(got, want), part
                continue
            scale = max(want.abs().max().item(), 1e-6)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * scale, msg=part)


@pytest.mark.parametrize("name", ["relstm", "relrnn", "memlstm", "tarnn"])
def test_the_compiled_loops_take_them_for_their_steps(name: str) -> None:
    """The products inside the compiled time loops (``csrc/products.h``; a step's
    64 × 128 → 4 · 128 + 128 for relstm) go to oneDNN inside the context, forward and
    backward, and only there; the step's outputs, state and gradients within float32 rounding
    of the loops' MKL products."""
    native = compiled.ops(torch.zeros(1))
    if native is None:
        pytest.skip("no compiled loops")
    torch.manual_seed(8)
    cell = make_cell(name, input_size=32, hidden_size=128)
    steps, batch = 24, 64
    x = torch.randn(steps, batch, 32)
    resets = torch.zeros(steps, batch, dtype=torch.bool)
    resets[9, :5] = resets[17, 40] = True

    def run() -> tuple[list[Tensor], int]:
        cell.zero_grad(set_to_none=True)
        before = native.onednn_product_count()
        output, state = cell(x, cell.initial_state(batch), resets)
        (output.square().mean() + sum(value.float().sum() for value in state)).backward()
        weights = [parameter.grad for parameter in cell.parameters()
                   if parameter.grad is not None]
        values = [output.detach(), *[value.detach() for value in state], *weights]
        return values, native.onednn_product_count() - before

    reference, outside = run()
    with onednn_products():
        fast, inside = run()
    assert outside == 0
    assert inside >= 2 * steps  # at least a step's forward product and its backward's
    for want, got in zip(reference, fast, strict=True):
        if not want.is_floating_point():
            assert torch.equal(got, want)
            continue
        scale = max(want.abs().max().item(), 1e-6)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * scale)


def test_the_supervised_trainer_takes_them(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    taken = products_taken(monkeypatch)
    run_supervised(tmp_path / "run", "task=adding", "memory=lru", "seq_len=64", "batch_size=64")
    assert taken, "the supervised trainer took no product in oneDNN"

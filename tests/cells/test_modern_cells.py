"""FFM, LRU, DeltaNet and GTrXL: their engines equal their steps, and their math does what the
papers say.

``tests/cells/test_engines.py`` holds their engine rows (chunks of 1, 15, 15 and 17 steps);
here the engines run over longer chunks, which the CPU's engines cut into several blocks (and
pad), and the engine functions themselves are checked against a plain loop in
float64, forwards and backwards, for every block size (the associative scan against the
elementwise loop, compiled where it has one map for every step; DeltaNet's chunkwise form
against the delta rule's loop, its compiled chunk against the chunkwise form).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from reference.equivalence import assert_matches_reference, random_resets
from torch import Tensor

from rlmem.cells import gtrxl, make_cell
from rlmem.cells._engines import associative_scan, compiled, delta_rule
from rlmem.cells._engines.associative_scan import diagonal_scan
from rlmem.cells._engines.delta_rule import delta_rule_scan
from rlmem.cells.deltanet import DeltaNet, DeltaNetState
from rlmem.cells.ffm import FFM, FORGOTTEN_AT
from rlmem.cells.lru import LRU

CELL_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("lru", {}), ("ffm", {"memory_size": 4, "context_size": 3}), ("deltanet", {"heads": 2}),
    ("gtrxl", {"heads": 2, "window": 6, "layers": 2}),
]


def loop(a: Tensor, b: Tensor, state: Tensor, resets: Tensor) -> Tensor:
    """The elementwise recurrence one step at a time: the specification of the scan."""
    states = []
    for t in range(b.shape[0]):
        state = torch.where(resets[t].view(-1, *(1,) * (state.dim() - 1)),
                            torch.zeros_like(state), state)
        state = a[t] * state + b[t]
        states.append(state)
    return torch.stack(states)


def delta_loop(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, state: Tensor,
               resets: Tensor) -> tuple[Tensor, Tensor]:
    """The delta rule one step at a time."""
    outputs = []
    for t in range(q.shape[0]):
        state = torch.where(resets[t].view(-1, 1, 1, 1), torch.zeros_like(state), state)
        error = v[t] - (state @ k[t].unsqueeze(-1)).squeeze(-1)
        state = state + (beta[t] * error).unsqueeze(-1) * k[t].unsqueeze(-2)
        outputs.append((state @ q[t].unsqueeze(-1)).squeeze(-1))
    return torch.stack(outputs), state


def assert_same_gradients(fast: list[Tensor], slow: list[Tensor], inputs: list[Tensor],
                          generator: torch.Generator) -> None:
    weights = [torch.randn(value.shape, generator=generator, dtype=torch.float64)
               for value in fast]
    grads = [torch.autograd.grad(torch.stack([(value * weight).abs().sum() for value, weight
                                              in zip(values, weights, strict=True)]).sum(),
                                 inputs)
             for values in (fast, slow)]
    for got, want in zip(*grads, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("order", ["step by step", "logarithmic rounds"])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_scan_equals_the_loop(kind: str, order: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forward and hand-written backward, both ways of running a chunk (the CPU's step by
    step, the accelerator's logarithmic rounds over the whole chunk)."""
    if order == "logarithmic rounds":
        monkeypatch.setattr(associative_scan, "STEP_BY_STEP_ON", ())
    generator = torch.Generator().manual_seed(0)
    steps, batch = 37, 4

    def draw(*size: int) -> Tensor:
        value = torch.randn(*size, generator=generator, dtype=torch.float64)
        if kind == "complex":
            value = torch.complex(value, torch.randn(*size, generator=generator,
                                                     dtype=torch.float64))
        return (0.5 * value).requires_grad_()

    a, b, state = draw(steps, batch, 5), draw(steps, batch, 5), draw(batch, 5)
    resets = random_resets(steps, batch, generator)
    fast = diagonal_scan(a, b, state, resets)
    slow = loop(a, b, state, resets)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12)
    assert_same_gradients([fast], [slow], [a, b, state], generator)


@pytest.mark.parametrize("a_shape", [(4, 3), (1, 3)], ids=["whole", "broadcast"])
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("loops", ["compiled", "python"])
def test_one_map_for_every_step_equals_the_loop(loops: str, kind: str, a_shape: tuple[int, ...],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The map FFM and LRU give (the same ``a`` at every step and for every batch item, here
    broadcast over the state's trailing dims too), which the CPU runs compiled
    (``csrc/diagonal.h``): states and the gradients of a, b and the state, with a reset at
    the first step of one batch item and others later."""
    if loops == "compiled" and compiled.ops(torch.zeros(1)) is None:
        pytest.skip("the compiled loops cannot be built here")
    monkeypatch.setenv(compiled.DISABLE_VARIABLE, "0" if loops == "compiled" else "1")
    generator = torch.Generator().manual_seed(0)
    steps, batch = 37, 4

    def draw(*size: int, scale: float = 0.5) -> Tensor:
        value = torch.randn(*size, generator=generator, dtype=torch.float64)
        if kind == "complex":
            value = torch.complex(value, torch.randn(*size, generator=generator,
                                                     dtype=torch.float64))
        return (scale * value).requires_grad_()

    # |a| mostly below 1, as the cells' decays are: the states stay of order 1
    a, b, state = draw(*a_shape, scale=0.3), draw(steps, batch, 4, 3), draw(batch, 4, 3)
    resets = random_resets(steps, batch, generator)
    resets[0, 1] = True
    fast = diagonal_scan(a, b, state, resets)
    slow = loop(a.expand_as(b), b, state, resets)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-12)
    assert_same_gradients([fast], [slow], [a, b, state], generator)


@pytest.mark.parametrize("block", [1, 5, 16, 64])
def test_delta_rule_blocks_equal_the_loop(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delta_rule, "CPU_BLOCK", block)
    generator = torch.Generator().manual_seed(0)
    steps, batch, heads, size = 37, 4, 2, 3

    def draw(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    q, v = draw(steps, batch, heads, size), draw(steps, batch, heads, size)
    k = torch.nn.functional.normalize(draw(steps, batch, heads, size), dim=-1)
    beta = torch.sigmoid(draw(steps, batch, heads, 1))
    state = draw(batch, heads, size, size)
    inputs = [value.requires_grad_() for value in (q, k, v, beta, state)]
    resets = random_resets(steps, batch, generator)
    fast = delta_rule_scan(q, k, v, beta, state, resets)
    slow = delta_loop(q, k, v, beta, state, resets)
    for got, want in zip(fast, slow, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    assert_same_gradients(list(fast), list(slow), inputs, generator)


@pytest.mark.parametrize("head_size", [3, 16, 32])
def test_compiled_delta_rule_equals_the_blocks(head_size: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """DeltaNet's compiled chunk (the CPU's: short convolution, feature map and delta rule step
    by step, ``csrc/delta_rule.h``) against the Python convolution and the chunkwise form in
    float64: outputs, final state (fast weights and window) and the gradients of input, state
    and weights (the filters included), with resets, from a window that holds numbers, at a
    head size read at run time and at two compiled in as constants; a step whose input is zero
    takes the feature map's clamped norm (q = k = 0)."""
    if compiled.ops(torch.zeros(1)) is None:
        pytest.skip("the compiled loops cannot be built here")
    torch.manual_seed(0)
    cell = make_cell("deltanet", input_size=5, hidden_size=7, heads=3,
                     head_size=head_size).double()
    assert isinstance(cell, DeltaNet)
    steps, batch = 41, 4
    x = torch.randn(steps, batch, 5, dtype=torch.float64)
    x[6, 1] = 0.0
    resets = random_resets(steps, batch, torch.Generator().manual_seed(1))
    state = DeltaNetState(torch.randn(batch, 3, head_size, head_size, dtype=torch.float64),
                          torch.randn(batch, 4, 3, 3, head_size, dtype=torch.float64))
    weights = torch.randn(steps, batch, 7, dtype=torch.float64)
    results = []
    for disabled in ("0", "1"):
        monkeypatch.setenv(compiled.DISABLE_VARIABLE, disabled)
        inputs = [x.clone().requires_grad_(), *(field.clone().requires_grad_() for field in state)]
        result = cell.fast_scan(inputs[0], DeltaNetState(*inputs[1:]), resets)
        loss = ((result.output * weights).sum() + result.state.S.square().sum()
                + result.state.window.sin().sum())
        results.append([result.output, result.state.S,
                        *torch.autograd.grad(loss, [*inputs, *cell.parameters()])])
    for got, want in zip(*results, strict=True):  # rtol: the clamped norm's 1/ε gradients
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("steps", [1, 23])
@pytest.mark.parametrize("head_size", [3, 16, 32, 64])
def test_compiled_delta_rule_float32_within_rounding_of_float64(head_size: int,
                                                                steps: int) -> None:
    """The compiled chunk in float32 (for heads of 16, 32 and 64 on a CPU with AVX-512, the
    fast weights' step, its backward and the SiLU of ``csrc/delta_rule_wide.h``, on S held
    transposed from two steps on; the build's own loops at 3) against the same chunk in
    float64, which the test above holds to the Python forms: outputs, final state and every
    gradient, with resets."""
    if compiled.ops(torch.zeros(1)) is None:
        pytest.skip("the compiled loops cannot be built here")
    torch.manual_seed(2)
    cell = make_cell("deltanet", input_size=6, hidden_size=9, heads=2, head_size=head_size)
    assert isinstance(cell, DeltaNet)
    batch = 5
    x = torch.randn(steps, batch, 6)
    resets = random_resets(steps, batch, torch.Generator().manual_seed(3))
    state = DeltaNetState(0.1 * torch.randn(batch, 2, head_size, head_size),
                          torch.randn(batch, 4, 3, 2, head_size))
    weights = torch.randn(steps, batch, 9)
    results = []
    for dtype in (torch.float32, torch.float64):
        model = cell.to(dtype)
        inputs = [tensor.to(dtype, copy=True).requires_grad_() for tensor in (x, *state)]
        result = model.fast_scan(inputs[0], DeltaNetState(*inputs[1:]), resets)
        loss = ((result.output * weights.to(dtype)).sum() + result.state.S.square().sum()
                + result.state.window.sin().sum())
        results.append([result.output, result.state.S, result.state.window,
                        *torch.autograd.grad(loss, [*inputs, *model.parameters()])])
    for single, double in zip(*results, strict=True):
        torch.testing.assert_close(single.double(), double, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("name", "options"), CELL_OPTIONS, ids=[n for n, _ in CELL_OPTIONS])
def test_long_chunks_equal_the_step(name: str, options: dict[str, Any],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 1, 40 and 29 steps: several blocks of the CPU scan, padded; a window that
    slides far within a chunk."""
    torch.manual_seed(0)
    engine = make_cell(name, input_size=3, hidden_size=6, **options)
    torch.manual_seed(0)
    step = make_cell(name, input_size=3, hidden_size=6, **options)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    assert_matches_reference(engine, step, steps=70, chunks=(1, 41), batch=4)


def test_gtrxl_query_blocks_equal_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks longer than a block of queries: blocks of 7 queries, the window of 6 reaching
    back across block boundaries."""
    monkeypatch.setattr(gtrxl, "query_block", lambda window, device: 7)
    test_long_chunks_equal_the_step("gtrxl", {"heads": 2, "window": 6}, monkeypatch)


@pytest.mark.parametrize("chunk", [1, 5, 23])
def test_gtrxl_folded_keys_equal_the_projected_ones(chunk: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The attention with W_k and W_v folded into the queries and the read equals the one that
    projects every key and value, in float64: outputs, window and the gradients of the input,
    the window and every weight, over a chunk with resets, from a window with empty slots,
    with heads that do not divide the width (padded heads)."""
    torch.manual_seed(0)
    cell = make_cell("gtrxl", input_size=3, hidden_size=6, heads=4, window=5).double()
    assert isinstance(cell, gtrxl.GTrXL)
    batch = 3
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(chunk, batch, 3, dtype=torch.float64)
    resets = random_resets(chunk, batch, generator)
    memory = torch.randn(batch, 2, 5, 6, dtype=torch.float64)
    valid = torch.rand(batch, 5, generator=generator) < 0.6
    memory = memory * valid[:, None, :, None]
    results = []
    for fold in (True, False):
        monkeypatch.setattr(gtrxl, "folds_keys", lambda *sizes, fold=fold: fold)
        inputs = [x.clone().requires_grad_(), memory.clone().requires_grad_()]
        result = cell.fast_scan(inputs[0], gtrxl.GTrXLState(inputs[1], valid), resets)
        loss = result.output.sin().sum() + result.state.memory.square().sum()
        results.append([result.output, result.state.memory, result.state.valid,
                        *torch.autograd.grad(loss, [*inputs, *cell.parameters()])])
    for got, want in zip(*results, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_gtrxl_folds_the_acting_step_and_projects_long_chunks() -> None:
    """The choice by multiplications: one query over a window of 32 (acting) folds; a chunk
    of 128 queries projects its keys once."""
    assert gtrxl.folds_keys(1, 33, 256, 4)
    assert not gtrxl.folds_keys(128, 160, 256, 4)


def test_lru_initialisation_is_the_papers_ring() -> None:
    torch.manual_seed(0)
    cell = make_cell("lru", input_size=3, hidden_size=200, r_min=0.4, r_max=0.9,
                     max_phase=math.pi / 10)
    assert isinstance(cell, LRU)
    lam = cell.lam().detach()
    assert lam.abs().min() >= 0.4 - 1e-6 and lam.abs().max() <= 0.9 + 1e-6
    assert lam.angle().min() >= 0 and lam.angle().max() <= math.pi / 10 + 1e-6
    # γ normalises: |γ|² + |λ|² = 1, so a unit-variance input keeps the state's variance.
    torch.testing.assert_close(torch.exp(2 * cell.gamma_log.detach()) + lam.abs() ** 2,
                               torch.ones(200), rtol=0, atol=1e-5)


def test_ffm_traces_decay_and_rotate_as_initialised() -> None:
    cell = make_cell("ffm", input_size=3, hidden_size=8, memory_size=5, context_size=3,
                     min_period=2.0, max_period=64.0)
    assert isinstance(cell, FFM)
    gamma = cell.gamma().detach()
    assert (gamma.abs() < 1).all()
    # The slowest trace keeps FORGOTTEN_AT of an input after max_period steps.
    assert gamma.abs().max().item() ** 64 == pytest.approx(FORGOTTEN_AT, rel=1e-4)
    periods = 2 * math.pi / gamma[0].angle().abs()
    torch.testing.assert_close(periods[[0, 2]], torch.tensor([2.0, 64.0]), rtol=1e-4, atol=0)


def test_deltanet_overwrites_where_linear_attention_would_add() -> None:
    """β = 1: writing a new value under the same key replaces the old one (the delta rule),
    and a query equal to the key reads it back exactly."""
    cell = make_cell("deltanet", input_size=3, hidden_size=4, heads=1, conv_size=1).double()
    assert isinstance(cell, DeltaNet)
    with torch.no_grad():
        cell.conv.fill_(1.0)  # the convolution passes each step's projection on unchanged
    # The step's features are pre-activation (q, k and v before SiLU, q and k before the norm,
    # β before σ): the key the cell writes under is normalize(silu(pre)), the value silu(v),
    # and σ(1000) = 1 in float64.
    pre = torch.tensor([[1.0, 2.0, -1.0, 0.5]], dtype=torch.float64)
    key = torch.nn.functional.normalize(torch.nn.functional.silu(pre), dim=-1)
    state = cell.initial_state(1)
    for value in (torch.tensor([[3.0, 0.0, 1.0, 2.0]]), torch.tensor([[-1.0, 4.0, 0.0, 1.0]])):
        features = torch.cat([pre, pre, value.double(),
                              torch.full((1, 1), 1e3, dtype=torch.float64)], -1)
        _, state, _ = cell.step(features, state)
        read = (state.S[0, 0] @ key[0])
        torch.testing.assert_close(read, torch.nn.functional.silu(value[0].double()), rtol=0,
                                   atol=1e-12)


def test_gtrxl_sees_layers_times_window_steps_and_no_further() -> None:
    torch.manual_seed(0)
    layers, window, steps = 2, 3, 12
    cell = make_cell("gtrxl", input_size=3, hidden_size=4, heads=2, window=window,
                     layers=layers).double()
    x = torch.randn(steps, 1, 3, dtype=torch.float64, requires_grad=True)
    y, state = cell(x)
    (grad,) = torch.autograd.grad(y[-1].sum(), x)
    reach = grad[:, 0].abs().sum(dim=1)
    assert (reach[:steps - 1 - layers * window] == 0).all()
    assert (reach[steps - 1 - layers * window:] > 0).all()
    assert state.valid.all()


def test_gtrxl_window_fills_from_a_reset() -> None:
    cell = make_cell("gtrxl", input_size=3, hidden_size=4, heads=2, window=5)
    resets = torch.zeros(9, 2, dtype=torch.bool)
    resets[6, 0] = True
    _, state = cell(torch.randn(9, 2, 3), None, resets)
    assert state.valid.sum(dim=1).tolist() == [3, 5]
    assert not state.memory[0, :, :2].any()  # the slots before the reset are empty


@pytest.mark.parametrize(("name", "options"), CELL_OPTIONS, ids=[n for n, _ in CELL_OPTIONS])
def test_bf16_autocast_runs_the_recurrence_in_the_states_precision(
        name: str, options: dict[str, Any]) -> None:
    """``amp=true`` (bf16 autocast): complex numbers and triangular solves have no bf16, so
    the recurrences run in the parameters' float32, and the state stays float32."""
    cell = make_cell(name, input_size=3, hidden_size=6, **options)
    x = torch.randn(20, 2, 3)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, state = cell(x)
        step, _ = cell(x[:1], state)
    y.float().sum().backward()
    assert torch.isfinite(y).all() and torch.isfinite(step).all()
    assert all(field.dtype in (torch.float32, torch.bool) for field in state)

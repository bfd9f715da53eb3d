"""The cell contract, checked for every registered cell: a new cell is tested by registering it.

Two-layer stacks (:class:`~rlmem.cells.Stacked`) of a few representative cells run through the
same tests: a fused kernel (lstm), fixed-size buffers with integer fields (relstm), an aux loss
and annealing (sarnn) and full attention (memlstm). Their dropout is 0 here, so that a stack is
deterministic in training mode; ``tests/cells/test_stacked.py`` covers dropout.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

import pytest
import torch

from rlmem.cells import CELLS, Cell, make_cell, scan

T, B, IN, H = 12, 3, 5, 8
StateT = TypeVar("StateT", bound=NamedTuple)

STACKED = ("lstm", "relstm", "sarnn", "memlstm")
"""Cells also tested as a two-layer stack, as ``<name>*2``."""

pytestmark = pytest.mark.parametrize("name", [*sorted(CELLS), *(f"{n}*2" for n in STACKED)])


def build(name: str, dtype: torch.dtype = torch.float64, seed: int = 0) -> Cell:
    torch.manual_seed(seed)
    cell, _, layers = name.partition("*")
    return make_cell(cell, input_size=IN, hidden_size=H,
                     num_layers=int(layers or 1)).to(dtype)


def inputs(seed: int = 1, steps: int = T, batch: int = B,
           dtype: torch.dtype = torch.float64) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(steps, batch, IN, generator=generator, dtype=dtype)


def assert_states_equal(a: NamedTuple, b: NamedTuple, atol: float = 1e-10) -> None:
    assert type(a) is type(b)
    for key, left, right in zip(a._fields, a, b, strict=True):
        assert left.dtype == right.dtype, key
        if left.is_floating_point():
            torch.testing.assert_close(left, right, atol=atol, rtol=0, msg=key)
        else:
            assert torch.equal(left, right), key


def select(state: StateT, index: int | slice) -> StateT:
    return type(state)(*(value[index] for value in state))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_shapes_dtype_device_and_finite(name: str, dtype: torch.dtype) -> None:
    cell = build(name, dtype)
    x = inputs(dtype=dtype)
    y, state = cell(x)
    assert y.shape == (T, B, cell.output_size)
    assert y.dtype == dtype and y.device == x.device
    assert torch.isfinite(y).all()
    for key, (shape, field_dtype) in cell.state_shapes().items():
        value = getattr(state, key)
        assert value.shape == (B, *shape)
        assert value.dtype == (field_dtype or dtype)
        assert value.device == x.device


def test_initial_state_is_zeros(name: str) -> None:
    cell = build(name)
    state = cell.initial_state(4)
    assert isinstance(state, cell.state_type)
    assert all(not value.any() for value in state)
    assert all(value.shape[0] == 4 for value in state)
    assert cell.state_size() == sum(value[0].numel() for value in state)


def test_two_chunks_equal_one_pass(name: str) -> None:
    cell = build(name)
    x = inputs()
    resets = torch.rand(T, B, generator=torch.Generator().manual_seed(2)) < 0.2
    y, state = cell(x, None, resets)
    y1, mid = cell(x[:5], None, resets[:5])
    y2, end = cell(x[5:], mid, resets[5:])
    torch.testing.assert_close(torch.cat([y1, y2]), y, atol=1e-10, rtol=0)
    assert_states_equal(end, state)


def test_reset_equals_fresh_run_and_spares_the_others(name: str) -> None:
    cell = build(name)
    x = inputs()
    k = 6
    resets = torch.zeros(T, B, dtype=torch.bool)
    resets[k, 1] = True
    y, state = cell(x, None, resets)
    fresh, fresh_state = cell(x[k:, 1:2])
    torch.testing.assert_close(y[k:, 1:2], fresh, atol=1e-10, rtol=0)
    assert_states_equal(select(state, slice(1, 2)), fresh_state)
    untouched, untouched_state = cell(x)
    for b in (0, 2):
        torch.testing.assert_close(y[:, b], untouched[:, b], atol=1e-10, rtol=0)
        assert_states_equal(select(state, slice(b, b + 1)), select(untouched_state,
                                                                    slice(b, b + 1)))


def test_no_gradient_across_a_reset(name: str) -> None:
    cell = build(name)
    x = inputs().requires_grad_()
    k = 6
    resets = torch.zeros(T, B, dtype=torch.bool)
    resets[k, 1] = True
    y, _ = cell(x, None, resets)
    (grad,) = torch.autograd.grad(y[k:, 1].sum(), x)
    assert grad[:k, 1].abs().max() == 0
    assert grad[k:, 1].abs().max() > 0


def test_batch_items_are_independent(name: str) -> None:
    cell = build(name)
    x = inputs().requires_grad_()
    resets = torch.rand(T, B, generator=torch.Generator().manual_seed(3)) < 0.2
    y, state = cell(x, None, resets)
    for b in range(B):
        alone, alone_state = cell(x[:, b:b + 1], None, resets[:, b:b + 1])
        torch.testing.assert_close(y[:, b:b + 1], alone, atol=1e-10, rtol=0)
        assert_states_equal(select(state, slice(b, b + 1)), alone_state)
    (grad,) = torch.autograd.grad(y[:, 0].sum(), x)
    assert grad[:, 1:].abs().max() == 0


def test_gradient_reaches_parameters_and_first_input(name: str) -> None:
    cell = build(name)
    x = inputs().requires_grad_()
    out = cell.forward_aux(x)
    (out.output.pow(2).sum() + out.aux.total_loss()).backward()
    assert x.grad is not None and x.grad[0].abs().max() > 0
    missing = [key for key, p in cell.named_parameters() if p.grad is None or not p.grad.any()]
    assert not missing, f"no gradient reached {missing}"


def test_fast_path_equals_generic_scan(name: str) -> None:
    cell = build(name)
    x = inputs()
    for probability in (0.0, 0.3):  # no reset inside the chunk, then resets everywhere
        resets = torch.rand(T, B, generator=torch.Generator().manual_seed(4)) < probability
        resets[0] = True
        y, state = cell(x, None, resets)
        y_generic, state_generic, _ = scan(cell.step, cell.project_input(x),
                                           cell.initial_state(B), resets)
        torch.testing.assert_close(y, y_generic, atol=1e-10, rtol=0)
        assert_states_equal(state, state_generic)


def test_aux_is_explicit_and_detached(name: str) -> None:
    cell = build(name)
    out = cell.forward_aux(inputs())
    for value in (*out.aux.diagnostics.values(), *out.aux.traces.values()):
        assert not value.requires_grad
    for value in out.aux.diagnostics.values():
        assert value.dim() == 0 and torch.isfinite(value)
    for value in out.aux.traces.values():
        assert value.shape[:2] == (T, B)
    for value in out.aux.losses.values():
        assert value.dim() == 0 and value.requires_grad


def test_bad_input_is_rejected_clearly(name: str) -> None:
    cell = build(name)
    with pytest.raises(ValueError, match="input_size"):
        cell(inputs()[..., :-1])
    with pytest.raises(ValueError, match=r"\(T, B, input_size\)"):
        cell(inputs()[0])
    with pytest.raises(ValueError, match="resets"):
        cell(inputs(), None, torch.zeros(T, B + 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="shape"):
        cell(inputs(), cell.initial_state(B + 1))
    assert type(cell).__name__ in repr(cell) and "hidden_size=8" in repr(cell)


def test_parameters_do_not_depend_on_the_sequence_length(name: str) -> None:
    """Public TARNN/iRNN code learns one η per timestep; ours must run past any training T."""
    cell = build(name)
    before = {key: p.clone() for key, p in cell.state_dict().items()}
    y, _ = cell(inputs(steps=60, batch=1))
    assert torch.isfinite(y).all()
    after = cell.state_dict()
    assert before.keys() == after.keys()
    assert all(before[key].shape == after[key].shape for key in before)


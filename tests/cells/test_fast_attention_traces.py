"""The attentive cells' engines (``rlmem.cells._engines.screened``, ``.full_attention``) beyond
what ``test_reference_equivalence`` and ``test_engines`` compare: the traces and diagnostics
that figures and trainers read against the frozen references, the recycled buffers, and the
fallbacks.

Everything is compared with the frozen references in float64, under random per-env resets,
from a non-zero incoming state, in chunks.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch
from reference import memlstm, relevancy
from reference.attention import AdditiveAttention
from reference.base import Cell as ReferenceCell
from reference.equivalence import random_resets

from rlmem.cells import Cell, make_cell
from rlmem.cells._engines.workspace import WORKSPACE

INPUT, HIDDEN, STEPS, BATCH = 3, 6, 40, 5

CASES: list[tuple[str, type[ReferenceCell], dict[str, Any], float | None]] = [
    ("relstm", relevancy.ReLSTM, {"short_term": 3, "relevant": 2}, None),
    ("relstm", relevancy.ReLSTM, {"short_term": 2, "relevant": 2}, 30.0),
    ("relrnn", relevancy.ReLRNN, {"short_term": 4, "relevant": 3}, 30.0),
    ("memlstm", memlstm.MemLSTM, {"capacity": 64}, None),
    ("memlstm", memlstm.MemLSTM, {"capacity": 8}, 30.0),  # overflows: a sliding window
]
IDS = [f"{name}-{i}" for i, (name, _, _, _) in enumerate(CASES)]

EXTRA_DIAGNOSTICS: dict[str, set[str]] = {"memlstm": {"memory_overflow"}}
"""Diagnostics a cell reports beyond its frozen reference's (``tests/cells/test_fidelity.py``)."""


def pair(name: str, reference: type[ReferenceCell], hparams: dict[str, Any],
         sharpen: float | None) -> tuple[Cell, ReferenceCell]:
    """The fast cell and its reference, in float64, with the same weights."""
    torch.manual_seed(0)
    slow = reference(INPUT, HIDDEN, **hparams).double()
    if sharpen is not None:  # peaked attention: later states enter R, screening replaces
        attention = slow.attention
        assert isinstance(attention, AdditiveAttention)
        with torch.no_grad():
            attention.score.weight.mul_(sharpen)
    fast = make_cell(name, input_size=INPUT, hidden_size=HIDDEN, **hparams).double()
    fast.load_state_dict(slow.state_dict())
    return fast, slow


def inputs(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    prefix = torch.randn(7, BATCH, INPUT, generator=generator, dtype=torch.float64)
    x = torch.randn(STEPS, BATCH, INPUT, generator=generator, dtype=torch.float64)
    return prefix, x, random_resets(STEPS, BATCH, generator)


def assert_same(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype, (what, a.shape, b.shape, a.dtype, b.dtype)
    if a.is_floating_point():
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(a, b), what


@pytest.mark.parametrize(("name", "reference", "hparams", "sharpen"), CASES, ids=IDS)
def test_traces_and_diagnostics_equal_the_reference(name: str, reference: type[ReferenceCell],
                                                    hparams: dict[str, Any],
                                                    sharpen: float | None) -> None:
    fast, slow = pair(name, reference, hparams, sharpen)
    prefix, x, resets = inputs()
    with torch.no_grad():
        fast_state, slow_state = fast(prefix)[1], slow(prefix)[1]
    bounds = [0, 1, 16, 31, STEPS]
    for begin, end in itertools.pairwise(bounds):
        got = fast.forward_aux(x[begin:end], fast_state, resets[begin:end])
        want = slow.forward_aux(x[begin:end], slow_state, resets[begin:end])
        assert got.aux.traces.keys() == want.aux.traces.keys()
        for key, value in want.aux.traces.items():
            assert_same(got.aux.traces[key], value, f"trace {key}, steps {begin}-{end}")
        assert got.aux.diagnostics.keys() == (want.aux.diagnostics.keys()
                                              | EXTRA_DIAGNOSTICS.get(name, set()))
        for key, value in want.aux.diagnostics.items():
            assert_same(got.aux.diagnostics[key], value, f"diagnostic {key}")
        fast_state, slow_state = got.state, want.state


@pytest.mark.parametrize(("name", "reference", "hparams", "sharpen"), CASES, ids=IDS)
def test_rollout_steps_equal_the_reference(name: str, reference: type[ReferenceCell],
                                           hparams: dict[str, Any],
                                           sharpen: float | None) -> None:
    """One step per call under no_grad, the state fed back, as a rollout acts."""
    fast, slow = pair(name, reference, hparams, sharpen)
    _, x, resets = inputs(seed=2)
    fast_state = fast.initial_state(BATCH, dtype=torch.float64)
    slow_state = slow.initial_state(BATCH, dtype=torch.float64)
    with torch.no_grad():
        for t in range(STEPS):
            got, fast_state = fast(x[t:t + 1], fast_state, resets[t:t + 1])
            want, slow_state = slow(x[t:t + 1], slow_state, resets[t:t + 1])
            assert_same(got, want, f"output at step {t}")
            for key, value in slow_state._asdict().items():
                assert_same(getattr(fast_state, key), value, f"state.{key} at step {t}")


@pytest.mark.parametrize("name", ["relstm", "relrnn", "memlstm"])
def test_outputs_do_not_alias_recycled_buffers(name: str) -> None:
    """A second call reuses the first call's scratch blocks: the first call's results stay."""
    torch.manual_seed(0)
    cell = make_cell(name, input_size=INPUT, hidden_size=HIDDEN)
    x = torch.randn(STEPS, BATCH, INPUT)
    first = cell.forward_aux(x)
    kept = [first.output.clone(), *(v.clone() for v in first.state),
            *(v.clone() for v in first.aux.traces.values())]
    first.output.sum().backward()
    cell.forward_aux(torch.randn(STEPS, BATCH, INPUT)).output.sum().backward()
    for before, after in zip(kept, [first.output, *first.state, *first.aux.traces.values()],
                             strict=True):
        assert torch.equal(before, after)
    assert WORKSPACE.limit > 0


@pytest.mark.parametrize("name", ["relstm", "relrnn", "memlstm"])
def test_a_second_backward_is_refused(name: str) -> None:
    cell = make_cell(name, input_size=INPUT, hidden_size=HIDDEN)
    loss = cell(torch.randn(4, 2, INPUT))[0].sum()
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="backpropagated once"):
        loss.backward()


@pytest.mark.parametrize("name", ["relstm", "relrnn", "memlstm"])
def test_autocast_runs_the_engine_in_float32_and_bfloat16_runs_the_step(name: str) -> None:
    torch.manual_seed(0)
    cell = make_cell(name, input_size=INPUT, hidden_size=HIDDEN)
    x = torch.randn(6, 2, INPUT)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, state = cell(x.to(torch.bfloat16))
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, cell(x.to(torch.bfloat16).float())[0], rtol=0, atol=0)
    assert all(value.dtype == want.dtype for value, want in zip(state, cell.initial_state(2),
                                                                  strict=True))
    cell = cell.to(torch.bfloat16)  # no engine for bfloat16 parameters: the step, via scan
    y16, _ = cell(x.to(torch.bfloat16))
    assert y16.dtype == torch.bfloat16 and torch.isfinite(y16).all()


@pytest.mark.parametrize(("name", "reference", "hparams", "sharpen"), CASES, ids=IDS)
def test_equal_chunks_chained_through_the_state_backpropagate_exactly(
        name: str, reference: type[ReferenceCell], hparams: dict[str, Any], sharpen: float | None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of one (odd) size reuse one another's recycled buffers in a single backward."""
    monkeypatch.setattr(WORKSPACE, "SMALL", 0)  # recycle even these small blocks
    fast, slow = pair(name, reference, hparams, sharpen)
    _, x, resets = inputs(seed=3)
    grads = []
    for cell in (fast, slow):
        x_leaf = x.clone().requires_grad_()
        state, total = None, torch.zeros((), dtype=torch.float64)
        for begin in range(0, STEPS, 7):
            y, state = cell(x_leaf[begin:begin + 7], state, resets[begin:begin + 7])
            total = total + (y * torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)).sum()
        assert state is not None
        total = total + sum(value.sum() for value in state if value.is_floating_point())
        (grad,) = torch.autograd.grad(total, x_leaf)
        grads.append(grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=1e-10)


def test_a_recycled_memory_block_is_zero_beyond_the_rows_asked_for() -> None:
    """MemLSTM's rollout step copies only the slots in use into a recycled block: the block
    must be zero beyond them, however far an earlier (longer) episode wrote into it."""
    from rlmem.cells._engines.workspace import Workspace

    workspace, shape = Workspace(), (2, 6, 3)
    alone = lambda block: 1  # noqa: E731 (nothing else holds the block: it is recycled)
    block = workspace.take_unshared(shape, torch.float64, torch.device("cpu"), alone, rows=5)
    assert not block.any()
    block.fill_(7.0)  # an episode wrote its 5 slots (and, against the promise, the 6th)
    again = workspace.take_unshared(shape, torch.float64, torch.device("cpu"), alone, rows=2)
    assert again.data_ptr() == block.data_ptr()
    assert not again[:, 2:5].any()  # cleared back to the new episode's 2 slots


def test_memlstm_rollout_after_a_long_episode_equals_the_reference() -> None:
    """The longest episode resets: the next steps use fewer slots than the recycled blocks
    were written with, and the states still equal the reference's, empty slots included."""
    fast, slow = pair("memlstm", memlstm.MemLSTM, {"capacity": 16}, None)
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(30, BATCH, INPUT, generator=generator, dtype=torch.float64)
    resets = torch.zeros(30, BATCH, dtype=torch.bool)
    resets[12, :] = True  # every episode ends at once: 12 slots in use, then 1
    fast_state = fast.initial_state(BATCH, dtype=torch.float64)
    slow_state = slow.initial_state(BATCH, dtype=torch.float64)
    with torch.no_grad():
        for t in range(30):
            got, fast_state = fast(x[t:t + 1], fast_state, resets[t:t + 1])
            want, slow_state = slow(x[t:t + 1], slow_state, resets[t:t + 1])
            assert_same(got, want, f"output at step {t}")
            for key, value in slow_state._asdict().items():
                assert_same(getattr(fast_state, key), value, f"state.{key} at step {t}")

"""Every cell computes exactly what its frozen reference (``tests/reference``) computes.

float64, outputs, final states and gradients to 1e-10, under random per-env resets (several per
env, at ``t = 0`` with a non-zero incoming state, episodes of length 1), run in chunks, with
buffers that overflow and K > 1 for the iterative cells. This is what lets a cell be made fast.
Every case runs twice: with the compiled loops and with their Python fallback.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from reference import ernn, irnn, lstm, memlstm, relevancy, sarnn, tarnn
from reference.attention import AdditiveAttention
from reference.base import Cell as ReferenceCell
from reference.equivalence import assert_matches_reference

from rlmem.cells import CELLS, extension, make_cell
from rlmem.cells.irnn import IRNNUpdate
from rlmem.cells.screening import RelevancyScreening, Screening

INPUT, HIDDEN = 3, 6

CASES: list[tuple[str, type[ReferenceCell], dict[str, Any]]] = [
    ("lstm", lstm.LSTM, {}),
    ("gru", lstm.GRU, {}),
    ("memlstm", memlstm.MemLSTM, {"capacity": 64}),
    ("memlstm", memlstm.MemLSTM, {"capacity": 8}),  # overflows: a sliding window
    ("relstm", relevancy.ReLSTM, {"short_term": 3, "relevant": 2}),
    ("relstm", relevancy.ReLSTM, {"short_term": 1, "relevant": 1}),
    ("relstm", relevancy.ReLSTM, {"short_term": 2, "relevant": 2, "sharpen": 30.0}),
    ("relrnn", relevancy.ReLRNN, {"short_term": 4, "relevant": 3}),
    ("relrnn", relevancy.ReLRNN, {"short_term": 3, "relevant": 2, "sharpen": 30.0}),
    ("memlstm", memlstm.MemLSTM, {"capacity": 8, "sharpen": 30.0}),
    ("tarnn", tarnn.TARNN, {}),
    ("tarnn", tarnn.TARNN, {"K": 2, "A": "coupled", "nonlinearity": "relu", "gamma1": 0.1,
                            "gamma2": 0.2}),
    ("sarnn", sarnn.SARNN, {}),
    ("sarnn", sarnn.SARNN, {"lam": 1e-2}),
    ("irnn", irnn.IncrementalRNN, {}),
    ("irnn", irnn.IncrementalRNN, {"K": 3, "eta": 0.3, "nonlinearity": "tanh"}),
    ("irnn", irnn.IncrementalRNN, {"K": 2, "rank": 2}),
    ("ernn", ernn.ERNN, {}),
    ("ernn", ernn.ERNN, {"K": 3, "eta": 0.4, "nonlinearity": "tanh"}),
]

SHARPEN = "sharpen"
"""A case key, not a hyperparameter: scale the attention's score vector v_a by this much. At
random init attention is nearly uniform, so the first ρ states keep the highest relevance and R
never replaces a member; peaked attention makes later states enter R and exercises screening."""

FAST_ONLY: dict[str, dict[str, Any]] = {
    "irnn": {"update_rule": IRNNUpdate.eq5, "learn_alpha": True},
}
"""Options of a fast cell that select its frozen reference's math: the reference iRNN computes
Eq. 5 with a learned α (the default is now the paper's Eq. 8 with α fixed)."""

STATE_VIEWS: dict[str, Any] = {}
"""A fast cell whose state is laid out differently from its reference's (a ring buffer, say)
maps its state to the reference's fields here."""


LOOPS = ("compiled", "python")
"""The two implementations of the hand-written loops: ``rlmem/cells/csrc/loops.cpp`` (built at
first use) and the Python fallback. Both must equal the reference."""


@pytest.fixture(params=LOOPS)
def loops(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the compiled loops, or with the Python fallback they replace."""
    if request.param == "python":
        monkeypatch.setenv(extension.DISABLE_VARIABLE, "1")
    elif not extension.enabled():
        pytest.skip(f"{extension.DISABLE_VARIABLE} is set")
    else:
        assert extension.ops(torch.zeros(1)) is not None, "the compiled loops did not build"
    return request.param


def test_every_registered_cell_has_a_reference() -> None:
    assert {name for name, _, _ in CASES} == set(CELLS)


@pytest.mark.parametrize(("name", "reference", "hparams"), CASES,
                         ids=[f"{name}-{i}" for i, (name, _, _) in enumerate(CASES)])
def test_fast_cell_equals_its_reference(name: str, reference: type[ReferenceCell],
                                        hparams: dict[str, Any], loops: str) -> None:
    hparams = dict(hparams)
    sharpen = hparams.pop(SHARPEN, None)
    reference_cell = reference(INPUT, HIDDEN, **hparams)
    if sharpen is not None:
        attention = reference_cell.attention
        assert isinstance(attention, AdditiveAttention)
        with torch.no_grad():
            attention.score.weight.mul_(sharpen)
    if name == "sarnn":  # a slope other than 1 exercises the annealed hard sigmoid
        assert isinstance(reference_cell, sarnn.SARNN)
        reference_cell.anneal(0.5)
    fast = make_cell(name, input_size=INPUT, hidden_size=HIDDEN, **hparams,
                     **FAST_ONLY.get(name, {}))
    assert_matches_reference(fast, reference_cell, state_view=STATE_VIEWS.get(name))


@pytest.mark.parametrize(("name", "hparams"), [
    ("relstm", {"short_term": 3, "relevant": 2}),
    ("relstm", {"short_term": 2, "relevant": 1}),
    ("relrnn", {"short_term": 4, "relevant": 3}),
])
def test_normalised_screening_engine_equals_the_step_path(name: str, hparams: dict[str, Any],
                                                          loops: str,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """``screening=normalised`` (not in the paper, so without a frozen reference) trains through
    the chunk engine; its reference is the cell's own :meth:`step` under autograd, the path it
    took before, forced here. Attention is sharpened so that states beat the uniform share,
    enter R and replace each other."""
    cells = []
    for _ in range(2):
        cell = make_cell(name, input_size=INPUT, hidden_size=HIDDEN,
                         screening=Screening.normalised, **hparams)
        assert isinstance(cell, RelevancyScreening) and cell.runs_engine()
        cells.append(cell)
    fast, step_path = cells
    with torch.no_grad():
        step_path.attention.score.weight.mul_(30.0)
    monkeypatch.setattr(step_path, "runs_engine", lambda: False)
    assert_matches_reference(fast, step_path)
    # The check above means something only if screening kept some states out of R, let
    # others in, and replaced some (ν = 1 would admit none: a state's share is then exactly 1).
    x = torch.randn(48, 5, INPUT, dtype=torch.float64)
    traces = step_path.double().forward_aux(x).aux.traces
    admitted = traces["relevant_valid"].any(dim=2)
    in_r = traces["slot_time"][:, :, step_path.short_term:]
    replaced = (in_r[1:] != in_r[:-1]) & (in_r[:-1] >= 0)
    assert admitted.any() and not admitted.all() and replaced.any()

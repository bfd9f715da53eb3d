"""Every cell computes exactly what its frozen reference (``tests/reference``) computes.

float64, outputs, final states and gradients to 1e-10, under random per-env resets (several per
env, at ``t = 0`` with a non-zero incoming state, episodes of length 1), run in chunks, with
buffers that overflow and K > 1 for the iterative cells. This is what lets a cell be made fast.
Every case runs twice: with the compiled loops and with their Python fallback. (Which engine
runs which cell, each proven equal to the cell's own step: ``tests/cells/test_engines.py``.)
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from reference import ernn, irnn, lstm, memlstm, relevancy, sarnn, tarnn
from reference.attention import AdditiveAttention
from reference.base import Cell as ReferenceCell
from reference.equivalence import LOOPS, assert_matches_reference, use_loops

from rlmem.cells import CELLS, make_cell
from rlmem.cells.irnn import IRNNUpdate

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


@pytest.fixture(params=LOOPS)
def loops(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test with the compiled loops, or with the Python fallback they replace."""
    use_loops(request.param, monkeypatch)
    return str(request.param)


AFTER_THE_REFERENCES = {"ffm", "lru", "deltanet", "gtrxl"}
"""Cells added after rlmem 0.1 (issue 56), which have no frozen reference: their
specification is their own ``step``, which their engines are proven equal to
(``tests/cells/test_engines.py``, ``tests/cells/test_modern_cells.py``)."""


def test_every_registered_cell_has_a_reference() -> None:
    assert {name for name, _, _ in CASES} == set(CELLS) - AFTER_THE_REFERENCES


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

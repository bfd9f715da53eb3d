"""What a cell returns beside its output (:class:`rlmem.cells.Aux`)."""

from __future__ import annotations

import pytest
import torch

from rlmem.cells import Cell, make_cell


def test_diagnostics_are_worked_out_only_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rollout step (``cell(x)``) never reads the diagnostics; ``forward_aux`` works them out
    on first access, once."""
    cell = make_cell("sarnn", input_size=3, hidden_size=4)
    calls: list[int] = []
    original = type(cell).diagnostics

    def counted(self: Cell, traces: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        calls.append(1)
        return original(self, traces)

    monkeypatch.setattr(type(cell), "diagnostics", counted)
    x = torch.randn(5, 2, 3)
    cell(x)
    aux = cell.forward_aux(x).aux
    assert not calls
    assert "skip_percent" in aux.diagnostics and aux.diagnostics is aux.diagnostics
    assert len(calls) == 1

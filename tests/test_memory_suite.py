"""The memory suite's labels: which overrides, budget and seeds each one trains with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from experiments.memory import suite


@pytest.fixture
def sweeps(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def record(root: Path, env: str, memories: list[str], seeds: list[int], frames: int,
               jobs: int, overrides: list[str], label: str = "${memory.name}") -> None:
        calls.append({"memories": memories, "seeds": seeds, "frames": frames,
                      "overrides": overrides, "label": label})

    monkeypatch.setattr(suite, "train_sweep", record)
    return calls


def test_a_cell_stops_at_the_suite_return_and_an_ablation_keeps_its_own_rule(
        sweeps: list[dict[str, Any]]) -> None:
    suite.train("relstm", [0, 1, 2], 1, ["extra=1"])
    suite.train("relstm_view3", [0], 1, [])
    suite.train("relstm_view3_no_stop", suite.seeds_of("relstm_view3_no_stop", 3), 1, [])
    cell, stopped, unstopped = sweeps
    assert cell["overrides"] == [f"stop_return={suite.STOP_RETURN}", "extra=1"]
    assert stopped["overrides"] == [f"stop_return={suite.STOP_RETURN}", suite.VIEW3]
    assert stopped["label"] == "relstm_view3" and stopped["frames"] == 3 * suite.FRAMES
    assert unstopped["overrides"] == [suite.VIEW3]
    assert unstopped["memories"] == ["relstm"] and unstopped["seeds"] == [0, 1, 2]
    assert unstopped["label"] == "relstm_view3_no_stop"


def test_every_ablation_is_a_label_after_the_cells() -> None:
    assert suite.LABELS[-len(suite.ABLATIONS):] == list(suite.ABLATIONS)
    assert all(ablation.memory in suite.LABELS for ablation in suite.ABLATIONS.values())

"""benchmarks/minigrid_view.py: its timing in turn, and its table."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from load_benchmark("minigrid_view")


def test_every_work_is_called_as_often_in_turn(bench: ModuleType) -> None:
    calls = {"a": 0, "b": 0}

    def count(key: str) -> None:
        calls[key] += 1

    times = bench.microseconds([lambda: count("a"), lambda: count("b")], 3 * bench.BLOCK)
    assert calls == {"a": 3 * bench.BLOCK, "b": 3 * bench.BLOCK}
    assert len(times) == 2 and all(time > 0 for time in times)


def test_prints_a_row_per_env(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["minigrid_view.py", "--envs", "DoorKey-5x5", "MemoryS7",
                                      "--steps", str(bench.BLOCK)])
    bench.main()
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith(("| DoorKey-5x5 ", "| MemoryS7 "))]
    assert len(rows) == 2 and all(row.endswith("% |") for row in rows)

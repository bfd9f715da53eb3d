"""benchmarks/cell_speed.py: its tables, its bounds and the exit status of --check."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from load_benchmark("cell_speed")


def test_both_measurements_give_a_ratio_per_cell(bench: ModuleType) -> None:
    cpu = torch.device("cpu")
    for rows in (bench.measure_train(["lstm", "tarnn", "sarnn"], 2, 8, 4, 2, cpu),
                 bench.measure_rollout(["lstm", "irnn"], 2, 8, 3, 2, cpu)):
        by_cell = {row.cell: row for row in rows}
        assert by_cell["lstm"].ratio == 1.0 and by_cell["lstm"].bound is None
        assert all(row.seconds > 0 and row.ratio > 0 for row in rows)
    assert {row.cell: row.bound for row in rows}["irnn"] == bench.ROLLOUT_BOUND


def test_memlstm_rollout_is_also_reported_at_full_capacity(bench: ModuleType) -> None:
    rows = {row.cell: row for row in bench.measure_rollout(["lstm", "memlstm"], 2, 8, 3, 2,
                                                           torch.device("cpu"))}
    assert rows["memlstm"].bound == bench.ROLLOUT_BOUND
    assert rows["memlstm (full)"].bound is None and rows["memlstm (full)"].seconds > 0


def test_table_flags_a_cell_above_its_bound(bench: ModuleType,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    rows = [bench.Row("lstm", 1e-3, 1.0, None), bench.Row("tarnn", 3e-3, 3.0, 2.0)]
    assert not bench.print_table("title", "step", rows)
    assert "| tarnn | 3.000 | 3.00× | 2.0× | **above** |" in capsys.readouterr().out
    assert bench.print_table("title", "step", rows[:1])


@pytest.mark.parametrize(("bound", "status"), [(1e-9, 1), (1e9, 0)])
def test_check_exits_non_zero_above_a_bound(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str], bound: float,
                                            status: int) -> None:
    monkeypatch.setitem(bench.TRAIN_BOUNDS, "ernn", bound)
    monkeypatch.setattr(bench, "ROLLOUT_BOUND", 1e9)
    monkeypatch.setattr(sys, "argv", ["cell_speed.py", "--check", "--cells", "lstm", "ernn",
                                      "--batch", "2", "3", "--hidden", "8", "--steps", "4",
                                      "--repeats", "1"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == status
    out = capsys.readouterr().out
    assert out.count("Forward + backward") == 2 and out.count("Rollout step") == 2
    assert "load average at start" in out and "load average at end" in out


def test_gtrxl_rollout_is_reported_not_checked(bench: ModuleType) -> None:
    rows = {row.cell: row for row in bench.measure_rollout(["lstm", "gtrxl", "lru"], 2, 8, 3, 1,
                                                           torch.device("cpu"))}
    assert rows["gtrxl"].bound is None and rows["gtrxl"].seconds > 0
    assert rows["lru"].bound == bench.ROLLOUT_BOUND

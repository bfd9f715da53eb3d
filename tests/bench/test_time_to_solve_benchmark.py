"""benchmarks/time_to_solve.py: its report from given runs, and (slow) a whole pair of tiny
runs, the reference commit's and this checkout's."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from benchmark_scripts import load_benchmark

from experiments.common.report import improvement
from experiments.fast_trainer.solve_runs import Solve
from rlmem.stats import iqm


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from load_benchmark("time_to_solve")


def _solve(wall_s: float, frames: int, reached: bool = True) -> Solve:
    return Solve(frames=frames, reached=reached, wall_s=wall_s, load_before=1.0,
                 load_after=2.5)


def test_the_report_has_every_seed_and_the_ratio_of_the_iqms(bench: ModuleType) -> None:
    reference = [_solve(100.0, 200_000), _solve(140.0, 300_000), _solve(90.0, 190_000, False)]
    new = [_solve(20.0, 400_000), _solve(35.0, 500_000), _solve(25.0, 450_000)]
    text = bench.table({("DoorKey-5x5", "lstm"): [
        {"reference": old, "new": fresh} for old, fresh in zip(reference, new, strict=True)]})
    row = next(line for line in text.splitlines() if line.startswith("| DoorKey-5x5 "))
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert cells[2] == "100, 140, 90+"  # the run that did not reach the threshold: a bound
    assert cells[5] == "2 of 3" and cells[9] == "3 of 3"
    ratio = iqm([100.0, 140.0, 90.0]) / iqm([20.0, 35.0, 25.0])
    assert cells[10] == f"{ratio:.2f}×"
    assert cells[11] == improvement([100.0, 140.0, 90.0], [20.0, 35.0, 25.0])  # P(new faster)
    assert "1.00 to 2.50" in text


@pytest.mark.slow
def test_a_pair_of_tiny_runs_trains_each_side_with_its_own_code(
        bench: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench.main(["--envs", "DoorKey-5x5", "--memories", "lstm", "--seeds", "3", "--frames",
                "4096", "--threshold", "0.0", "--runs", str(tmp_path)])
    assert "| DoorKey-5x5 | lstm |" in capsys.readouterr().out
    reference, new = (yaml.safe_load((tmp_path / side / "DoorKey-5x5" / "lstm" / "seed3" /
                                      "config.yaml").read_text()) for side in bench.SIDES)
    assert "env_backend" not in reference  # f7a96db's config had no such key
    assert (reference["num_envs"], reference["agent"]["preset"]) == (16, "minigrid")
    assert (new["num_envs"], new["agent"]["preset"], new["env_backend"]) == (256, "fast",
                                                                            "tensor")


def test_the_new_side_takes_more_overrides(bench: ModuleType) -> None:
    args = argparse.Namespace(processes=2, new_overrides=["agent.compiled_lstm=true"])
    assert bench.new_side(args) == [*bench.NEW, "agent.processes=2", "agent.compiled_lstm=true"]
    assert bench.new_side(argparse.Namespace(processes=1, new_overrides=[])) == list(bench.NEW)

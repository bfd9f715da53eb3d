"""The async-against-sync check (experiments/async_learning/check.py): its table reads each
run's frames, final recent return and the suites' evaluations, and means only full columns."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from experiments.async_learning import check


def fake_run(run: Path, frames: int, recent: float, returns: dict[str, float]) -> None:
    """A finished run: its last progress row and one sampled evaluation per env."""
    (run / "eval").mkdir(parents=True)
    with (run / "progress.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["frames", "return_recent"])
        writer.writerow([frames, recent])
    for env, value in returns.items():
        (run / "eval" / f"{env}_sampled_100ep_seed0.json").write_text(json.dumps(
            {"env": env, "frames": frames, "argmax": False, "episodes": 100,
             "return_mean": value}))


def test_the_table_sets_async_beside_sync_seed_by_seed(tmp_path: Path) -> None:
    sync, runs = tmp_path / "sync", tmp_path / "async"
    case = check.Case("MemoryS7", "MemoryS13", sync, lambda root, train: 0)
    for seed in check.SEEDS:
        fake_run(sync / "MemoryS7" / "lstm" / f"seed{seed}", 1000 * (seed + 1), 0.9,
                 {"MemoryS7": 0.9, "MemoryS13": 0.3})
    fake_run(runs / "MemoryS7" / "lstm" / "seed0", 2048, 0.95,
             {"MemoryS7": 0.94, "MemoryS13": 0.5})
    lines = check.table(case, runs)
    assert "| 0 | sync | 1,000 | 0.900 | 0.900 | 0.300 |" in lines
    assert "| 0 | async | 2,048 | 0.950 | 0.940 | 0.500 |" in lines
    assert "| 1 | async | not run | — | — | — |" in lines
    assert "| mean | sync | 2,000 | 0.900 | 0.900 | 0.300 |" in lines
    assert not any(line.startswith("| mean | async") for line in lines)  # two seeds missing

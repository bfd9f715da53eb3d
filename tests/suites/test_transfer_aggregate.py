"""``experiments/transfer/aggregate.py``: which evaluations the table averages."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.transfer.aggregate import collect


def _run(root: Path, seed: int, budget: int, trained: int, evaluated: int) -> Path:
    run = root / "RedBlueDoors-6x6" / "lstm" / f"seed{seed}"
    (run / "eval").mkdir(parents=True)
    (run / "config.yaml").write_text(f"frames: {budget}\n")
    (run / "progress.csv").write_text(f"frames,return_mean\n2048,0.1\n{trained},0.5\n")
    (run / "eval" / "RedBlueDoors-8x8.json").write_text(json.dumps(
        {"env": "RedBlueDoors-8x8", "frames": evaluated, "return_mean": seed / 10,
         "success_rate": seed / 10}))
    return run


def test_only_final_evaluations_at_the_largest_budget_are_averaged(tmp_path: Path) -> None:
    runs = [_run(tmp_path, 0, 500_000, 501_760, 501_760),   # resumed to the new budget
            _run(tmp_path, 1, 100_000, 100_352, 100_352),   # not resumed yet
            _run(tmp_path, 2, 500_000, 300_000, 100_352),   # resuming: its evaluation is stale
            _run(tmp_path, 3, 500_000, 401_408, 401_408)]   # stopped early by stop_return
    scores, successes, frames, _ = collect(runs)
    assert scores["RedBlueDoors-8x8"]["lstm"] == [0.0, 0.3]
    assert successes["RedBlueDoors-8x8"]["lstm"] == [0.0, 0.3]
    assert frames[("RedBlueDoors-6x6", "lstm")] == {100_352, 401_408, 501_760}

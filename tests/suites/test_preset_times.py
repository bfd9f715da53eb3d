"""Issue 57: each preset's time here comes from its runs on this machine's CPU, in words that
say how many runs, how they ended and what the whole budget costs; or from a measured prefix,
with its load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from experiments.supervised import preset_times


def _run(root: Path, seed: int, *, device: str = "cpu", iterations: int = 500,
         seq_len: int = 100) -> None:
    """A finished run folder: its config, one progress row and its results."""
    run_dir = root / "p" / f"seed{seed}"
    run_dir.mkdir(parents=True)
    config = {"task": {"name": "copy"}, "memory": {"name": "relstm", "hidden_size": 128},
              "seq_len": seq_len, "batch_size": 10, "iterations": 1000, "device": device}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    (run_dir / "progress.csv").write_text(
        f"iteration,time/elapsed_s,time/cpu_s\n{iterations},{iterations * 0.2},"
        f"{iterations * 0.1}\n")
    results = {"iterations": iterations, "elapsed_s": iterations * 0.2,
               "cpu_s": iterations * 0.1, "converged_at": iterations, "diverged": None}
    (run_dir / "results.json").write_text(json.dumps(results))


def test_the_runs_of_a_preset_on_this_cpu_and_its_settings_time_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preset_times, "RUNS", tmp_path)
    monkeypatch.setattr(preset_times, "REPO", tmp_path)
    _run(tmp_path, 0, iterations=300)
    _run(tmp_path, 1, iterations=900)
    _run(tmp_path, 2, device="cuda")  # another machine's speed
    _run(tmp_path, 3, seq_len=200)  # other settings than the preset's
    settings = {"task.name": "copy", "memory.name": "relstm", "seq_len": 100,
                "batch_size": 10, "memory.hidden_size": 128}
    runs = preset_times.runs_of("p", settings)
    assert [run["run"] for run in runs] == ["p/seed0", "p/seed1"]
    text = preset_times.from_runs(runs, budget=3000)
    assert text.startswith("2 runs here (`p/seed*`; 2 target met): median 2 min wall "
                           "(60 s to 3 min), 60 s CPU.")
    assert text.endswith("The whole budget, 3,000 iterations, at their median pace: about "
                         "10 min wall, 5 min CPU")


def test_a_measured_prefix_states_its_load_and_extrapolates() -> None:
    measured = {"iterations": 120, "s_per_iteration": 2.0, "cpu_s_per_iteration": 0.5,
                "load": [3.1, 2.2], "date": "2026-11-28"}
    assert preset_times.from_measurement(measured, budget=30_000) == (
        "no run here yet. The whole budget, 30,000 iterations: about 16 h 40 min wall at "
        "load 2.2–3.1, 4 h 10 min CPU, extrapolated from 120 iterations measured on "
        "2026-11-28")

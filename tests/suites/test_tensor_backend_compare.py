"""``experiments/tensor_backend/compare.py`` at tiny frames: one seed of one env on both
backends, trained, skipped when done, and compared."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli

from experiments.common import arm_runs
from experiments.tensor_backend import compare

TINY = [arg for arg in TINY_PPO if not arg.startswith(("frames=", "progress_bar="))]


def test_compare_trains_both_backends_and_reports(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The runs through the tests' zygote (cli_runner), not a fresh interpreter each.
    monkeypatch.setattr(arm_runs, "run_child", lambda command: run_cli(
        command[2], *command[3:], cwd=tmp_path).returncode)
    argv = ["--runs", str(tmp_path), "--frames", "64", "--envs", "MemoryS7", "--seeds", "3",
            "--", *TINY]
    assert compare.main(argv) == 0
    for arm in compare.ARMS:
        assert arm_runs.trained_frames(arm.run_dir(tmp_path, "MemoryS7", 3)) == 64
    out = capsys.readouterr().out
    assert "MemoryS7 gymnasium seed 3: training" in out and "P(tensor ≥ gymnasium)" in out
    results = tmp_path / "RESULTS.md"
    monkeypatch.setattr(compare, "RESULTS", results)
    assert compare.main(["--write", *argv]) == 0  # nothing left to train
    assert "training" not in capsys.readouterr().out
    assert "MemoryS7 (lstm, seeds 3-7), last return_recent:" in results.read_text()

"""A supervised run's closing paragraph says whether it learned: its final measure against the
task's memoryless baseline, and, when it did not, what learns the task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import run_cli

from rlmem.supervised import LEARNED_BELOW, evaluate_saved_run, verdict
from rlmem.tasks import TrainResult, make_task


def _result(ce: float) -> TrainResult:
    return TrainResult(600, 10.0, 10.0, {"eval/ce@T10": ce, "eval/accuracy@T10": 0.5})


def test_the_verdict_compares_the_final_measure_with_the_baseline() -> None:
    baseline = make_task("copy").baseline(10)
    learned = verdict(_result(0.5 * baseline.value), 10, baseline, "copy")
    assert learned.startswith("It learned: ce ") and f"{baseline.value:.4f}" in learned
    close = verdict(_result(0.99 * LEARNED_BELOW * baseline.value), 10, baseline, "copy")
    assert close.startswith("It learned")
    for ce in (LEARNED_BELOW * baseline.value, 1.01 * baseline.value, 3 * baseline.value):
        said = verdict(_result(ce), 10, baseline, "copy")
        assert said.startswith("It did not learn: ") and "seq_len=10 memory=relstm" in said
    adding = make_task("adding").baseline(200)
    result = TrainResult(1, 1.0, 1.0, {"eval/mse@T200": 0.17})
    assert "+preset=kag2021_grid_lr1e-3_adding_tarnn_T200" in verdict(result, 200, adding,
                                                                      "adding")
    assert verdict(TrainResult(1, 1.0, 1.0, {}), 10, baseline, "copy") == ""


@pytest.fixture(scope="module")
def tiny_copy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy run of 10 iterations, far too few to learn, and what it printed."""
    here = tmp_path_factory.mktemp("copy")
    result = run_cli("rlmem.supervised", "task=copy", "seq_len=10", "iterations=10",
                     "memory.hidden_size=8", "batch_size=8", "eval_batch_size=16",
                     "progress_bar=false", "figures=false", f"run_dir={here / 'run'}", cwd=here)
    assert result.returncode == 0, result.stderr
    return here / "run", result.stdout


def test_a_run_that_cannot_learn_says_so(tiny_copy_run: tuple[Path, str]) -> None:
    _, output = tiny_copy_run
    closing = output[output.index("finished 10 iterations"):]
    assert "It did not learn: ce " in closing and "memoryless baseline's 0.6931" in closing
    assert "python -m rlmem.supervised task=copy seq_len=10 memory=relstm lr=1e-2" in closing


def test_transfer_copy_evaluates_a_copy_run_without_training_it(
        tiny_copy_run: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        tmp_path: Path) -> None:
    run_dir, _ = tiny_copy_run
    before = {path: path.stat().st_mtime_ns for path in run_dir.rglob("*")}
    results = evaluate_saved_run(run_dir, [20, 40], {}, 16)
    saved = json.loads((run_dir / "results.json").read_text())["eval"]
    assert results["ce@T10"] == saved["ce@T10"]  # the run's own evaluation batch at its T
    assert {"ce@T20", "accuracy@T40"} <= results.keys()
    output = capsys.readouterr().out
    assert "trained 10 iterations at T=10, evaluated (nothing trained or written)" in output
    assert "  T=40: ce " in output and "It did not learn" in output
    assert {path: path.stat().st_mtime_ns for path in run_dir.rglob("*")} == before
    with pytest.raises(ValueError, match=r"no checkpoint\.pt there"):
        evaluate_saved_run(tmp_path, [20], {}, 16)
    result = run_cli("rlmem.supervised", "task=transfer_copy", f"run={run_dir}",
                     "eval_seq_lens=[20]", "eval_batch_size=16", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "  T=20: ce " in result.stdout and not (tmp_path / "runs").exists()

"""A supervised run's closing paragraph says whether it learned: its final measure against the
task's memoryless baseline, and, when it did not, what learns the task."""

from __future__ import annotations

from pathlib import Path

from cli_runner import run_cli

from rlmem.supervised import LEARNED_BELOW, verdict
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


def test_a_run_that_cannot_learn_says_so(tmp_path: Path) -> None:
    result = run_cli("rlmem.supervised", "task=copy", "seq_len=10", "iterations=10",
                     "memory.hidden_size=8", "batch_size=8", "eval_batch_size=16",
                     "progress_bar=false", "figures=false", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    closing = result.stdout[result.stdout.index("finished 10 iterations"):]
    assert "It did not learn: ce " in closing and "memoryless baseline's 0.6931" in closing
    assert "python -m rlmem.supervised task=copy seq_len=10 memory=relstm lr=1e-2" in closing

"""The memory suite's labels: which overrides, budget and seeds each one trains with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from experiments.common import suite_runs
from experiments.memory import suite
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs


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
        sweeps: list[dict[str, Any]], runs: Path) -> None:
    suite.train("relstm", [0, 1, 2], 1, ["extra=1"])
    suite.train("relstm_view3", [0], 1, [])
    for seed in range(3):  # what relstm_view3_no_stop continues
        fake_run(runs / "relstm_view3" / f"seed{seed}", 3)
    suite.train("relstm_view3_no_stop", suite.seeds_of("relstm_view3_no_stop", 3), 1, [])
    cell, stopped, unstopped = sweeps
    assert cell["overrides"] == [f"stop_return={suite.STOP_RETURN}", *suite.TRAINER, "extra=1"]
    assert stopped["overrides"] == [f"stop_return={suite.STOP_RETURN}", *suite.TRAINER,
                                    suite.VIEW3]
    assert stopped["label"] == "relstm_view3" and stopped["frames"] == 3 * suite.FRAMES
    assert unstopped["overrides"] == [*suite.TRAINER, suite.VIEW3]
    assert unstopped["memories"] == ["relstm"] and unstopped["seeds"] == [0, 1, 2]
    assert unstopped["label"] == "relstm_view3_no_stop"


def test_every_ablation_is_a_label_after_the_cells() -> None:
    assert suite.LABELS[-len(suite.ABLATIONS):] == list(suite.ABLATIONS)
    assert all(ablation.memory in suite.LABELS for ablation in suite.ABLATIONS.values())


def test_the_recipe_is_the_3x3_view_with_the_heading_for_the_papers_budget() -> None:
    """The suite's ``relstm_view3_direction_5M`` row trains the documented recipe: composed, it
    is what the ``*_view3`` rows' overrides and that ablation's budget and stop rule say."""
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        recipe = compose("train", overrides=[suite.RECIPE, "memory=relstm"])
        spelled = compose("train", overrides=[suite.VIEW3, "direction=true", "env=MemoryS7",
                                              f"frames={suite.PAPER_FRAMES}", "memory=relstm"])
    ablation = suite.ABLATIONS["relstm_view3_direction_5M"]
    assert recipe.frames == ablation.frames and recipe.stop_return is ablation.stop_return
    for key in ("env", "env_kwargs", "direction", "frames", "stop_return", "memory"):
        assert recipe[key] == spelled[key], key
    assert recipe.run_dir == "runs/ppo/MemoryS7/relstm_memory_transfer/seed0"


def test_a_continuation_names_an_earlier_ablation_of_the_same_cell_with_a_smaller_budget() -> None:
    for label, ablation in suite.ABLATIONS.items():
        if ablation.continues is None:
            continue
        source = suite.ABLATIONS[ablation.continues]
        assert source.memory == ablation.memory, label
        assert source.frames <= ablation.frames, label
        assert suite.LABELS.index(ablation.continues) < suite.LABELS.index(label), label


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(suite, "RUNS", tmp_path)
    return tmp_path / suite.ENV


def fake_run(run: Path, frames: int) -> None:
    (run / "eval").mkdir(parents=True)
    (run / "eval" / "MemoryS13.json").write_text("{}")
    (run / "checkpoint.pt").write_text(f"weights at {frames}")
    (run / "progress.csv").write_text(f"frames\n{frames}\n")


def test_a_continuation_starts_from_a_copy_of_the_shorter_run_but_not_its_evaluations(
        sweeps: list[dict[str, Any]], runs: Path) -> None:
    fake_run(runs / "lstm_view3_direction" / "seed0", 3)
    suite.train("lstm_view3_direction_5M", [0, 1, 2], 1, [])
    copy = runs / "lstm_view3_direction_5M" / "seed0"
    assert (copy / "checkpoint.pt").read_text() == "weights at 3"
    assert (copy / "progress.csv").read_text() == "frames\n3\n"
    assert not (copy / "eval").exists()
    assert not (runs / "lstm_view3_direction_5M" / "seed1").exists()  # the 3M row has 1 seed
    assert sweeps[0]["label"] == "lstm_view3_direction_5M" and sweeps[0]["seeds"] == [0, 1, 2]
    # Once the continuation has its own checkpoint, the source is not copied again.
    (copy / "checkpoint.pt").write_text("weights at 4")
    suite.train("lstm_view3_direction_5M", [0], 1, [])
    assert (copy / "checkpoint.pt").read_text() == "weights at 4"


def test_a_continuation_whose_source_has_not_run_is_refused_before_any_copy(
        sweeps: list[dict[str, Any]], runs: Path) -> None:
    fake_run(runs / "relstm_view3_direction" / "seed0", 3)
    with pytest.raises(SystemExit, match=r"relstm_view3_direction/seed1 .*has no checkpoint"):
        suite.train("relstm_view3_direction_5M", [0, 1], 1, [])
    assert not (runs / "relstm_view3_direction_5M").exists() and not sweeps


def kept_run(run: Path, frames: int) -> None:
    """A finished run as the repository keeps it: progress and evaluations of its final
    frames, no checkpoint (experiments/README.md)."""
    (run / "eval").mkdir(parents=True)
    (run / "eval" / "MemoryS7.json").write_text(json.dumps({"frames": frames}))
    (run / "progress.csv").write_text(f"frames\n{frames}\n")


def test_a_finished_run_kept_without_its_checkpoint_is_not_started(
        sweeps: list[dict[str, Any]], runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stopped by its rule before its budget, or at its budget, a run whose checkpoint the
    repository does not keep is finished: not trained, and not copied again from the run it
    continued; a run with its checkpoint is started as ever (it returns at once if finished)."""
    kept_run(runs / "relstm" / "seed0", 376_832)
    fake_run(runs / "relstm" / "seed1", 2048)
    standing = suite_runs.standing(runs / "relstm" / "seed0", suite.FRAMES, suite.STOP_RETURN)
    assert standing.finished and standing.describe() == (
        "finished: 376832 frames (evaluated; its checkpoint is not kept)")
    suite.train("relstm", [0, 1, 2], 1, [])
    assert [call["seeds"] for call in sweeps] == [[1, 2]]
    assert f"[suite] {runs / 'relstm' / 'seed0'}: finished: 376832 frames" in \
        capsys.readouterr().out
    kept_run(runs / "relstm_view3_direction_5M" / "seed0", suite.PAPER_FRAMES)
    suite.train("relstm_view3_direction_5M", [0], 1, [])  # its 3M source is not there either
    assert len(sweeps) == 1 and not (runs / "relstm_view3_direction").exists()


def test_each_batch_of_seeds_is_evaluated_before_the_next_trains(
        runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sitting that ends during a label's later seeds has scored the seeds it finished:
    ``--jobs`` seeds train, then they are evaluated, then the next ``--jobs``."""
    steps: list[tuple[str, list[str]]] = []

    def evaluate(run_dirs: list[Path], envs: list[str], episodes: int,
                 jobs: int, **limits: Any) -> list[Any]:
        steps.append(("evaluate", [run.name for run in run_dirs]))
        return []

    monkeypatch.setattr(suite, "evaluate_step", evaluate)
    monkeypatch.setattr(suite, "train_sweep", lambda *args, **kwargs: steps.append(
        ("train", [f"seed{seed}" for seed in args[3]])))
    kept_run(runs / "lstm" / "seed1", suite.FRAMES)  # finished in an earlier sitting
    assert suite.main(["--memories", "lstm", "gru_update_bias1", "--seeds", "4",
                       "--jobs", "2", "--runs", str(runs.parent)]) == 0
    # The finished seed takes no place in a batch; every seed is offered to evaluation last
    # (evaluate_step skips those with an up-to-date result).
    assert steps == [("train", ["seed0", "seed2"]), ("evaluate", ["seed0", "seed2"]),
                     ("train", ["seed3"]), ("evaluate", ["seed3"]),
                     ("evaluate", ["seed0", "seed1", "seed2", "seed3"]),
                     ("train", ["seed0"]), ("evaluate", ["seed0"]),  # an ablation: one seed
                     ("evaluate", ["seed0"])]
    assert suite.batches([0, 1, 2, 3, 4], 1) == [[seed] for seed in range(5)]

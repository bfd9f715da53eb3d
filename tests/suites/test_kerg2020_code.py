"""``experiments/transfer/kerg2020_code.py`` and its table: each memory trains with its recipe,
and the table keeps the two counts of the evaluation apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from experiments.transfer import aggregate, kerg2020_code


def test_each_memory_trains_with_its_recipe(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert kerg2020_code.main(["--dry-run", "--runs", str(tmp_path), "--seeds", "3"]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines()
                if "rlmem.train" in line]
    assert commands == [
        f"python -m rlmem.train env=DoorKey-5x5 memory={memory} seed=3 frames=5001216 "
        f"progress_bar=false run_dir={tmp_path}/DoorKey-5x5/{memory}/seed3 +recipe={recipe}"
        for memory, recipe in (("relstm", "kerg2020_code"), ("lstm", "kerg2020_code_lstm"))]


def _report(run: Path, env: str, value: float, first_to_end: bool) -> None:
    (run / "eval").mkdir(parents=True, exist_ok=True)
    name = f"{env}_sampled{'_first-to-end' if first_to_end else ''}_100ep_seed0.json"
    (run / "eval" / name).write_text(json.dumps(
        {"env": env, "frames": 4096, "episodes": 100, "return_mean": value,
         "success_rate": value, **({"first_to_end": True} if first_to_end else {})}))


def test_the_table_keeps_the_authors_count_apart(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for memory, ours, theirs in (("relstm", 0.1, 0.4), ("lstm", 0.2, 0.3)):
        run = tmp_path / "DoorKey-5x5" / memory / "seed0"
        run.mkdir(parents=True)
        (run / "config.yaml").write_text("frames: 4096\n")
        (run / "progress.csv").write_text("frames,return_mean\n4096,0.5\n")
        _report(run, "DoorKey-16x16", ours, first_to_end=False)
        _report(run, "DoorKey-16x16", theirs, first_to_end=True)
    monkeypatch.setattr(aggregate, "RUNS_KERG2020_CODE", tmp_path)
    monkeypatch.setattr(aggregate, "RUNS_5M", tmp_path / "none")
    rows = {line.split(" | ")[1]: line.split(" | ") for line in aggregate.authors_code_path()
            if line.startswith("| DoorKey-16x16")}
    assert rows["relstm"][3:8] == ["0.100", "0.10", "10.0%", "0.400", "0.40"]
    assert rows["relstm"][9:] == ["—", "0.00 [0.00, 0.00]", "—", "1.00 [1.00, 1.00] |"]
    assert rows["lstm"][2] == "1 of 5" and rows["lstm"][6] == "0.300"


@pytest.mark.parametrize("memory", list(kerg2020_code.RECIPES))
def test_its_sweep_is_taken_by_the_front_door(tmp_path: Path, memory: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep each memory's recipe runs in passes ``rlmem.train``'s front door: a recipe
    that named each job's folder (``hydra.sweep.subdir``) beside the suite's ``run_dir`` was
    refused before any work, so the suite trained nothing."""
    from experiments.common import sweep
    from rlmem.schema.command_line import front_door
    from rlmem.train import LINE

    commands: list[list[str]] = []

    def run_child(command: list[str]) -> int:
        commands.append(command)
        return 0

    monkeypatch.setattr(sweep, "run_child", run_child)
    kerg2020_code.train(tmp_path, memory, [0, 1], 4096, 1, [])
    [command] = commands
    assert command[1:4] == ["-m", "rlmem.train", "-m"]
    taken = front_door(LINE, command[3:])
    assert f"run_dir={tmp_path}/${{env}}/${{memory.name}}/seed${{seed}}" in taken
    assert kerg2020_code.RECIPES[memory] in taken
    assert not any(argument.startswith("hydra.sweep.subdir=") for argument in taken)


def test_each_batch_of_seeds_is_evaluated_before_the_next_trains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sitting that ends during a memory's later seeds has scored the seeds it finished
    (a 5M-frame run is most of an hour): ``--jobs`` seeds train, then are evaluated both ways,
    then the next ``--jobs``; every seed is offered to evaluation last."""
    from experiments.common import suite_runs

    steps: list[tuple[str, list[str]]] = []

    def evaluate(run_dirs: list[Path], envs: list[str], episodes: int, jobs: int,
                 first_to_end: bool, **limits: Any) -> list[Any]:
        steps.append(("evaluate" + " first" * first_to_end, [run.name for run in run_dirs]))
        return []

    monkeypatch.setattr(suite_runs, "evaluate_step", evaluate)
    monkeypatch.setattr(kerg2020_code, "train_sweep", lambda *args, **kwargs: steps.append(
        ("train", [f"seed{seed}" for seed in args[3]])))
    assert kerg2020_code.main(["--memories", "lstm", "--seeds", "0", "1", "2", "--jobs", "2",
                               "--runs", str(tmp_path)]) == 0
    both = [("evaluate", ["seed0", "seed1"]), ("evaluate first", ["seed0", "seed1"])]
    assert steps == [("train", ["seed0", "seed1"]), *both,
                     ("train", ["seed2"]), ("evaluate", ["seed2"]), ("evaluate first", ["seed2"]),
                     ("evaluate", ["seed0", "seed1", "seed2"]),
                     ("evaluate first", ["seed0", "seed1", "seed2"])]

"""Issue 28 K2: the suites when another process holds some of their runs.

A run (or an evaluation) another process holds is reported skipped, not failed, and the suite
exits 0; two supervised suites at once never write into one ``train.log`` together; the memory
and transfer suites take ``--dry-run`` and ``--runs``. The runs here are real and tiny; the
other process is this test, holding the lock with :class:`~rlmem.runs.lock.RunLock`.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
from cli_runner import TINY_PPO
from locations import REPO

from experiments.common import suite_runs
from experiments.memory import suite as memory_suite
from experiments.supervised import suite as supervised_suite_module
from experiments.transfer import suite as transfer_suite
from rlmem.runs import load_checkpoint
from rlmem.runs.checkpoint import Checkpoint, save_checkpoint
from rlmem.runs.directory import claim_run_dir
from rlmem.runs.episode_stats import STOP_EPISODES
from rlmem.runs.lock import RunLock

RELSTM = "kerg2020_table1_transfer_copy_relstm"
TINY_SUPERVISED = ["iterations=2", "memory.hidden_size=8", "eval_batch_size=4", "eval_every=1",
                   "log_every=1", "checkpoint_every=1", "progress_bar=false", "seq_len=4",
                   "eval_seq_lens=[]", "transfer_every=null", "figures=false"]
TINY_SWEEP = [arg for arg in TINY_PPO if not arg.startswith(("frames=", "progress_bar="))]
"""TINY_PPO less what the RL suites set themselves."""


def held(run_dir: Path) -> RunLock:
    """``run_dir`` made an rlmem run directory (as the process running it made it), and its
    lock, to hold."""
    claim_run_dir(run_dir)
    return RunLock(run_dir)


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time."""
    return {str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in root.rglob("*") if path.is_file()}


def fake_run(run_dir: Path, frames: int) -> None:
    """A run that logged ``frames`` and has a checkpoint file (never loaded here)."""
    claim_run_dir(run_dir)
    (run_dir / "progress.csv").write_text(f"frames,updates\n{frames},1\n")
    (run_dir / "config.yaml").write_text("memory:\n  name: lstm\nseed: 0\n")
    (run_dir / "checkpoint.pt").write_text("not loaded by a dry run without stop_return")


# --- memory suite -------------------------------------------------------------------------------
def test_the_memory_suite_dry_run_shows_each_run_and_runs_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run ran something")

    monkeypatch.setattr(memory_suite, "train_sweep", never)
    monkeypatch.setattr(subprocess, "run", never)
    runs = tmp_path / memory_suite.ENV / "sb3_lstm"
    fake_run(runs / "seed0", memory_suite.FRAMES)
    before = files(tmp_path)
    with held(tmp_path / memory_suite.ENV / "relstm_view3" / "seed0"):
        code = memory_suite.main(["--dry-run", "--runs", str(tmp_path), "--memories", "sb3_lstm",
                                  "relstm_view3", "--seeds", "1", "--", "device=cpu"])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:5] == [
        f"# sb3_lstm seed 0: finished: {memory_suite.FRAMES} frames",
        f"# python -m rlmem.train env=MemoryS7 memory=lstm seed=0 frames={memory_suite.FRAMES} "
        f"progress_bar=false run_dir={runs / 'seed0'} agent=sb3 agent.policy=sb3_lstm "
        "vectorization=sync device=cpu",
        *(f"python -m rlmem.evaluate run={runs / 'seed0'} env={env} episodes=200"
          for env in ("MemoryS7", "MemoryS13")),
        f"# relstm_view3 seed 0: not started, running now (PID {os.getpid()})"]
    assert lines[5] == (
        f"# python -m rlmem.train env=MemoryS7 memory=relstm seed=0 frames="
        f"{3 * memory_suite.FRAMES} progress_bar=false run_dir="
        f"{tmp_path / 'MemoryS7' / 'relstm_view3' / 'seed0'} stop_return=0.94 "
        f"vectorization=sync {memory_suite.VIEW3} device=cpu")
    after = files(tmp_path)
    del after["MemoryS7/relstm_view3/seed0/.lock"], after["MemoryS7/relstm_view3/seed0/.rlmem-run"]
    assert after == before  # nothing was written


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_the_memory_suite_skips_a_run_another_process_holds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its job fails at once with RunLockedError (recorded), the other job trains; the held run
    is not evaluated, the other one is; the suite exits 0."""
    monkeypatch.setattr(memory_suite, "FRAMES", 64)
    monkeypatch.setattr(memory_suite, "EPISODES", 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    runs = tmp_path / memory_suite.ENV / "lstm"
    with held(runs / "seed0"):
        # Both seeds in one sweep (its jobs one after the other: the basic launcher), so
        # that the failed job is named by the key the sweep varies.
        code = memory_suite.main(["--memories", "lstm", "--seeds", "2", "--jobs", "2",
                                  "--runs", str(tmp_path),
                                  "--", *TINY_SWEEP, "hydra/launcher=basic"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (f"[suite] lstm: #0 seed=0: run_dir={runs / 'seed0'} is in use by another process "
            f"(PID {os.getpid()}). Skipped.") in out
    assert f"[suite] {runs / 'seed0'}: running now (PID {os.getpid()}); not evaluated" in out
    assert "FAILED" not in out
    assert load_checkpoint(runs / "seed1" / "checkpoint.pt").count("frames") == 64
    assert sorted(path.name for path in (runs / "seed1" / "eval").glob("*.json")) == [
        "MemoryS13_sampled_2ep_seed0.json", "MemoryS7_sampled_2ep_seed0.json"]
    assert sorted(path.name for path in (runs / "seed0").iterdir()) == [".lock", ".rlmem-run"]


# --- transfer suite -----------------------------------------------------------------------------
def test_the_transfer_suite_dry_run_lists_the_runs_in_the_runs_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run ran something")

    monkeypatch.setattr(transfer_suite, "train_sweep", never)
    monkeypatch.setattr(subprocess, "run", never)
    runs = tmp_path / "DoorKey-5x5" / "lstm"
    fake_run(runs / "seed1", 2048)
    before = files(tmp_path)
    code = transfer_suite.main(["--dry-run", "--runs", str(tmp_path), "--envs", "DoorKey-5x5",
                                "--memories", "lstm", "--seeds", "0", "1", "--frames", "4096"])
    assert code == 0
    command = ("python -m rlmem.train env=DoorKey-5x5 memory=lstm seed={seed} frames=4096 "
               "progress_bar=false run_dir={run}")
    assert capsys.readouterr().out.splitlines()[:6] == [
        "# DoorKey-5x5 lstm seed 0: not started",
        command.format(seed=0, run=runs / "seed0"),
        "# DoorKey-5x5 lstm seed 1: trained 2048 of 4096 frames",
        command.format(seed=1, run=runs / "seed1"),
        *(f"python -m rlmem.evaluate run={runs / 'seed1'} env={env} episodes=100"
          for env in ("DoorKey-5x5", "DoorKey-16x16"))]
    assert files(tmp_path) == before


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_the_transfer_suite_skips_held_runs_and_held_evaluations(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 0 is held while it trains elsewhere; seed 1 trains here, and its evaluation on
    DoorKey-5x5 is being made by another process (its lock in ``eval/``): both are skipped."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    runs = tmp_path / "DoorKey-5x5" / "lstm"
    claim_run_dir(runs / "seed1")
    with held(runs / "seed0"), RunLock(runs / "seed1" / "eval",
                                                   name=".DoorKey-5x5_sampled_1ep_seed0.lock"):
        code = transfer_suite.main([
            "--envs", "DoorKey-5x5", "--memories", "lstm", "--seeds", "0", "1", "--frames",
            "64", "--episodes", "1", "--runs", str(tmp_path), "--", *TINY_SWEEP,
            "hydra/launcher=basic"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"[suite] DoorKey-5x5: #0 seed=0: run_dir={runs / 'seed0'} is in use" in out
    assert (f"[suite] DoorKey-5x5: run={runs / 'seed1'} env=DoorKey-5x5: the evaluation of "
            f"{runs / 'seed1'} on DoorKey-5x5 is in use by another process") in out
    assert "FAILED" not in out
    assert load_checkpoint(runs / "seed1" / "checkpoint.pt").count("frames") == 64
    assert [path.name for path in (runs / "seed1" / "eval").glob("*.json")] == [
        "DoorKey-16x16_sampled_1ep_seed0.json"]


def test_the_transfer_suite_starts_no_finished_run_kept_without_its_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finished runs whose checkpoints the repository does not keep (at their budget, or
    evaluated at their final frames) are left out of the sweeps; the runs left are swept
    together where their seeds agree."""
    calls: list[tuple[list[str], list[int]]] = []
    monkeypatch.setattr(transfer_suite, "train_sweep",
                        lambda root, env, memories, seeds, *args: calls.append((memories, seeds)))
    for memory, seed, frames in (("lstm", 0, 4096), ("lstm", 1, 4096), ("relstm", 0, 2048)):
        [run] = transfer_suite.run_dirs(tmp_path, "DoorKey-5x5", [memory], [seed])
        (run / "eval").mkdir(parents=True)
        (run / "eval" / "DoorKey-16x16.json").write_text(json.dumps({"frames": frames}))
        (run / "progress.csv").write_text(f"frames,updates\n{frames},1\n")
    transfer_suite.train(tmp_path, "DoorKey-5x5", ["lstm", "relstm", "gru", "sarnn"], [0, 1],
                         4096, 1, [])
    assert calls == [(["relstm"], [1]), (["gru", "sarnn"], [0, 1])]


def test_a_run_short_of_its_budget_is_not_evaluated(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A suite evaluates finished runs only: one whose training stopped part-way (a sitting
    that ended, a sweep that failed) is said to be so and left alone, as an evaluation of it
    would be read as its result."""
    evaluated: list[list[str]] = []

    def run_recorded(command: list[str]) -> None:
        evaluated.append(command)

    monkeypatch.setattr(suite_runs, "run_recorded", run_recorded)
    short, finished, stopped = (tmp_path / f"seed{seed}" for seed in range(3))
    fake_run(short, 2048)
    fake_run(finished, 4096)
    # Stopped by the stop_return its config records: finished short of the budget.
    fake_run(stopped, 2048)
    (stopped / "config.yaml").write_text("memory:\n  name: lstm\nseed: 2\nstop_return: 0.9\n")
    save_checkpoint(stopped / "checkpoint.pt", Checkpoint(
        config={}, extras={"recent_returns": [0.95] * STOP_EPISODES}))
    suite_runs.evaluate_step([short, finished, stopped], ["DoorKey-5x5"], 1, 1, budget=4096)
    assert f"[suite] {short}: trained 2048 of 4096 frames; not evaluated" in \
        capsys.readouterr().out
    assert [command[3] for command in evaluated] == [f"run={finished}", f"run={stopped}"]



def committed_part_way(run_dir: Path, frames: int) -> None:
    """A run as a commit made before it finished keeps it: ``config.yaml`` and
    ``progress.csv``, no checkpoint, no marker (a real run's files, its checkpoint deleted)."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text("memory:\n  name: lstm\nseed: 0\n")
    (run_dir / "progress.csv").write_text(f"frames,updates\n{frames},1\n")


def test_a_run_trained_part_way_without_its_checkpoint_is_swept_apart_to_start_again(
        tmp_path: Path) -> None:
    """Only a run that cannot resume gets ``resume=false force=true``: a sweep's overrides
    reach all its runs, and on a run with a checkpoint ``resume=false`` would start it over."""
    fresh, resumes, gone, held_now, finished = (tmp_path / f"seed{seed}" for seed in range(5))
    fake_run(resumes, 2048)
    committed_part_way(gone, 2048)
    committed_part_way(held_now, 2048)
    committed_part_way(finished, 4096)
    runs_of = dict(enumerate([fresh, resumes, gone, held_now, finished]))
    with RunLock(held_now):  # another process runs it now: it is skipped, not started over
        assert [suite_runs.cannot_resume(run, 4096) for run in runs_of.values()] == [
            False, False, True, False, False]
        assert suite_runs.sweep_groups(runs_of, 4096) == [
            ([0, 1, 3], ()), ([2], suite_runs.AGAIN)]


def test_a_suite_starts_a_run_committed_part_way_again_keeping_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run committed before it finished cannot resume, and ``rlmem.train`` refuses its folder
    as one it did not make; the suite (here the transfer suite's training step, real and tiny)
    starts it again from zero beside a fresh run, the partial files moved into
    ``previous/``."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    gone, fresh = transfer_suite.run_dirs(tmp_path, "DoorKey-5x5", ["lstm"], [0, 1])
    committed_part_way(gone, 32)
    partial = (gone / "progress.csv").read_text()
    transfer_suite.train(tmp_path, "DoorKey-5x5", ["lstm"], [0, 1], 64, 1,
                         [*TINY_SWEEP, "hydra/launcher=basic"])
    for run in (gone, fresh):
        assert load_checkpoint(run / "checkpoint.pt").count("frames") == 64
    [previous] = (gone / "previous").iterdir()
    assert (previous / "progress.csv").read_text() == partial
    assert not (fresh / "previous").exists()

# --- supervised suite ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def supervised() -> ModuleType:
    """experiments.supervised.suite."""
    return supervised_suite_module


def supervised_suite(module: ModuleType, runs: Path) -> int:
    code = module.main(["--presets", RELSTM, "--seeds", "0", "--runs", str(runs), "--",
                        *TINY_SUPERVISED])
    assert isinstance(code, int)
    return code


def test_the_supervised_suite_skips_a_run_taken_just_before_it_starts(
        supervised: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen held before the start, the run is skipped at once; taken between that look and the
    run's start (the look made blind here), the run refuses, and the refusal is a skip too,
    the last line of that start in train.log."""
    run_dir = tmp_path / RELSTM / "seed0"
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    with held(run_dir):
        assert supervised_suite(supervised, tmp_path) == 0
        assert f"run by PID {os.getpid()} now; skipped" in capsys.readouterr().out
        look = supervised.run_status
        monkeypatch.setattr(supervised, "run_status",
                            lambda *args: replace(look(*args), holder=None))
        assert supervised_suite(supervised, tmp_path) == 0
    out = capsys.readouterr().out
    assert f"seed 0: run_dir={run_dir} is in use by another process (PID {os.getpid()}). " \
           "Skipped." in out and "FAILED" not in out
    log = (run_dir / "train.log").read_text().strip().splitlines()
    assert log[0].startswith(f"[suite PID {os.getpid()}, ") and log[0].endswith(
        f"+ python -m rlmem.supervised +preset={RELSTM} seed=0 progress_bar=false "
        f"run_dir={run_dir} {' '.join(TINY_SUPERVISED)}")
    assert log[-1].startswith("rlmem.supervised: error: run_dir=") and len(log) == 2
    assert not (run_dir / "checkpoint.pt").exists()


def test_a_supervised_suite_never_writes_into_the_log_another_suite_holds(
        supervised: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / RELSTM / "seed0"
    claim_run_dir(run_dir)
    log = run_dir / "train.log"
    log.write_text("the other suite's run\n")
    with log.open("a") as other:  # the other suite holds its log while its run runs
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)
        assert supervised_suite(supervised, tmp_path) == 0
    assert "another suite is running it" in capsys.readouterr().out
    assert log.read_text() == "the other suite's run\n"
    assert not (run_dir / "checkpoint.pt").exists()


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_two_supervised_suites_at_once_train_a_run_once_into_one_log(tmp_path: Path) -> None:
    """Two suite processes started together over the same run: one trains it, the other skips
    it, both exit 0, and train.log holds the one start."""
    command = [sys.executable, "-m", "experiments.supervised.suite", "--presets", RELSTM,
               "--seeds", "0", "--runs", str(tmp_path), "--", *TINY_SUPERVISED[1:],
               "iterations=300"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    suites = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    outputs = [suite.communicate(timeout=300)[0] for suite in suites]
    assert [suite.returncode for suite in suites] == [0, 0], outputs
    said = "\n".join(outputs)
    assert said.count("; starting, log") == 1 and said.count("skipped") == 1, said
    log = (tmp_path / RELSTM / "seed0" / "train.log").read_text()
    assert log.count("[suite PID ") == 1 and "error" not in log, log
    assert load_checkpoint(tmp_path / RELSTM / "seed0" / "checkpoint.pt").count(
        "iteration") == 300

"""Issue 28 K1: a Hydra sweep goes on past a failed job and ends with the list of failed jobs
(``rlmem.runs.multirun``), with the basic and the joblib launcher, for ``rlmem.train`` and
``rlmem.supervised``; a single run reports as before, and Ctrl-C still ends the whole sweep.

Every sweep here is real: a subprocess as a user would start it, in ``tmp_path``, with
``TMPDIR`` there too, so the test sees that the failure records leave nothing behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, assert_stopped_at_its_checkpoint, run_cli, wait_for

from experiments.common.outcome import Outcome, ending, failures_recorded_in
from rlmem.runs import load_checkpoint
from rlmem.runs.directory import claim_run_dir
from rlmem.runs.lock import RunLock
from rlmem.runs.multirun import (
    ENDED,
    RECORDS_ENV,
    STARTED,
    JobFailure,
    job_overrides,
    one_line,
    read_failures,
    record_failure,
    swept_keys,
)

DIVERGED = "agent.lr=100000000000.0"
"""How Hydra spells ``agent.lr=1e11``, the job that diverges at its first update."""
TINY_SUPERVISED = ["iterations=2", "eval_batch_size=4", "eval_every=1", "log_every=1",
                   "checkpoint_every=1", "progress_bar=false", "seq_len=4", "eval_seq_lens=[]",
                   "transfer_every=null", "figures=false", "device=cpu"]
"""A supervised run of two iterations on copy at T=4."""


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``tmp_path``'s ``tmp/``, the sweeps' ``TMPDIR``, where their records go."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.delenv(RECORDS_ENV, raising=False)
    return tmp_path / "tmp"


def assert_only(tmp_path: Path, *names: str) -> None:
    """``tmp_path`` holds ``names`` and nothing else (no ``multirun/``, no ``.hydra``), and no
    sweep's records are left in ``tmp/`` (the sweeps' TMPDIR)."""
    assert sorted(os.listdir(tmp_path)) == sorted([*names, "tmp"])
    assert_no_records(tmp_path / "tmp")
    assert not list(tmp_path.rglob(".hydra"))


def assert_no_records(scratch: Path) -> None:
    """No sweep's temporary records directory is left (torch may leave its own caches)."""
    assert not list(scratch.glob("rlmem-sweep-*"))


def train_sweep(tmp_path: Path, *launcher: str) -> subprocess.CompletedProcess[str]:
    """``agent.lr=1e11,0.001``: the first job diverges, the second trains."""
    return run_cli("rlmem.train", "-m", "agent.lr=1e11,0.001", *TINY_PPO,
                   f"run_dir={tmp_path / 'runs'}/lr${{agent.lr}}",
                   f"hydra.sweep.dir={tmp_path / 'sweep'}", *launcher, cwd=tmp_path)


def assert_second_job_trained(result: subprocess.CompletedProcess[str], runs: Path) -> None:
    assert result.returncode == 1, result.stderr[-3000:]
    assert load_checkpoint(runs / "lr0.001" / "checkpoint.pt").count("frames") == 64
    assert not (runs / "lr100000000000.0" / "checkpoint.pt").exists()
    # The job's own message, prefixed with the job, then the summary naming it.
    assert f"rlmem.train: error: job #0 ({DIVERGED}): the PPO loss is nan" in result.stderr
    summary = result.stderr[result.stderr.index("1 job of this sweep failed"):]
    assert f"\n  #0 {DIVERGED}: the PPO loss is nan" in summary
    assert "lr=0.001" not in summary and "Traceback" not in result.stderr


def test_a_diverged_job_does_not_stop_the_sweep_basic_launcher(tmp_path: Path,
                                                               scratch: Path) -> None:
    result = train_sweep(tmp_path)
    assert_second_job_trained(result, tmp_path / "runs")
    assert_only(tmp_path, "runs", "sweep")


@pytest.mark.slow  # ~16 s; the basic launcher's twin runs by default
def test_a_diverged_job_does_not_stop_the_sweep_joblib_launcher(tmp_path: Path,
                                                                scratch: Path) -> None:
    """The jobs run in loky worker processes: the failure's record crosses to the sweep's."""
    result = train_sweep(tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    assert "Joblib.Parallel" in result.stdout + result.stderr
    assert_second_job_trained(result, tmp_path / "runs")
    assert_only(tmp_path, "runs", "sweep")


def test_a_supervised_sweep_goes_on_past_a_job_with_an_invalid_value(tmp_path: Path,
                                                                    scratch: Path) -> None:
    """``memory.hidden_size=0`` passes composition and fails in the job, at the cell's check."""
    result = run_cli("rlmem.supervised", "-m", "memory.hidden_size=0,8", *TINY_SUPERVISED,
                     f"run_dir={tmp_path / 'runs'}/h${{memory.hidden_size}}",
                     f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert load_checkpoint(tmp_path / "runs" / "h8" / "checkpoint.pt").count("iteration") == 2
    assert (tmp_path / "runs" / "h8" / "results.json").exists()
    assert not (tmp_path / "runs" / "h0").exists()
    assert "rlmem.supervised: error: job #0 (memory.hidden_size=0): " in result.stderr
    summary = result.stderr[result.stderr.index("1 job of this sweep failed"):]
    assert "\n  #0 memory.hidden_size=0: " in summary and "hidden_size" in summary
    assert_only(tmp_path, "runs", "sweep")


def test_a_locked_job_is_recorded_as_locked_where_the_caller_asked(tmp_path: Path,
                                                                  scratch: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """With :data:`RECORDS_ENV` set (as a suite sets it), the records stay there for the caller,
    and a run another process holds is told apart from a failed one."""
    records = tmp_path / "records"
    monkeypatch.setenv(RECORDS_ENV, str(records))
    runs = tmp_path / "runs"
    claim_run_dir(runs / "seed0")  # an rlmem run directory, as the process holding it made it
    with RunLock(runs / "seed0"):
        result = run_cli("rlmem.supervised", "-m", "seed=0,1", "memory.hidden_size=8",
                         *TINY_SUPERVISED, f"run_dir={runs}/seed${{seed}}",
                         f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert (runs / "seed1" / "results.json").exists()
    [failure] = read_failures(records)
    assert failure.locked and failure.job == 0 and failure.overrides == ("seed=0",)
    assert failure.reason == f"run_dir={runs / 'seed0'} is in use by another process " \
        f"(PID {os.getpid()})."
    assert f"\n  #0 seed=0: run_dir={runs / 'seed0'} is in use" in result.stderr


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_single_run_reports_as_before_and_records_only_when_asked(
        tmp_path: Path, scratch: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ("rlmem.train", "agent.lr=1e11", *TINY_PPO, f"run_dir={tmp_path / 'run'}")
    result = run_cli(*args, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("rlmem.train: error: the PPO loss is nan")
    assert "job #" not in result.stderr and "this sweep" not in result.stderr
    assert_only(tmp_path, "run")
    monkeypatch.setenv(RECORDS_ENV, str(tmp_path / "records"))
    assert run_cli(*args, cwd=tmp_path).returncode == 1
    [failure] = read_failures(tmp_path / "records")
    assert failure == JobFailure("rlmem.train", None, (), failure.reason, locked=False)
    assert failure.reason.startswith("the PPO loss is nan") and failure.reason.endswith(
        "stopping before applying it.")


def interrupted_sweep(tmp_path: Path, *launcher: str, running: int = 1,
                      jobs: int = 2) -> tuple[int, str]:
    """A sweep of ``jobs`` long runs, Ctrl-C'd (SIGINT to its process group, as a terminal
    does) once its first ``running`` runs have logged two updates: its exit status and
    stderr."""
    runs = tmp_path / "runs"
    command = [sys.executable, "-m", "rlmem.train", "-m",
               f"seed={','.join(map(str, range(jobs)))}", "frames=100000",
               *[arg for arg in TINY_PPO if not arg.startswith("frames=")],
               f"run_dir={runs}/seed${{seed}}", f"hydra.sweep.dir={tmp_path / 'sweep'}",
               *launcher]
    process = subprocess.Popen(command, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        wait_for(lambda: all((runs / f"seed{seed}" / "progress.csv").exists()
                             and len((runs / f"seed{seed}" / "progress.csv").read_text()
                                     .splitlines()) > 2 for seed in range(running)))
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return process.returncode, stderr


def test_ctrl_c_ends_the_whole_sweep_basic_launcher(tmp_path: Path, scratch: Path) -> None:
    code, stderr = interrupted_sweep(tmp_path)
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "this sweep failed" not in stderr
    assert not (tmp_path / "runs" / "seed1").exists()  # the second job never started
    assert_only(tmp_path, "runs", "sweep")


@pytest.mark.slow
def test_ctrl_c_ends_the_whole_sweep_joblib_launcher(tmp_path: Path, scratch: Path) -> None:
    code, stderr = interrupted_sweep(tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                                     running=2, jobs=3)
    assert code == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "this sweep failed" not in stderr
    assert_no_records(scratch)
    # Both jobs stopped at a checkpoint: the first to stop did not end the other (joblib kills
    # the workers left when a job raises).
    for seed in (0, 1):
        assert_stopped_at_its_checkpoint(tmp_path / "runs" / f"seed{seed}")
    assert stderr.count("holds the last finished step. Resume with:") == 2
    # The third job, queued behind them, was taken up by a worker after the Ctrl-C: not started.
    assert "job #2 (seed=2) not started: its sweep was interrupted" in stderr
    assert not (tmp_path / "runs" / "seed2").exists()


def test_a_job_is_named_by_its_swept_values_and_a_reason_is_one_sentence() -> None:
    swept = swept_keys(["agent.lr=1e11,0.001", "num_envs=2", "seed=range(3)", "+x=choice(1,2)",
                        "run_dir=/r/${seed}"], {"memory": "lstm,gru"})
    assert swept == {"agent.lr", "seed", "x", "memory"}
    assert job_overrides(["agent.lr=0.001", "num_envs=2", "seed=1", "+x=2"], swept) == (
        "agent.lr=0.001", "seed=1", "+x=2")
    assert job_overrides(["num_envs=2"], set()) == ("num_envs=2",)  # a sweep of one job
    assert one_line("run_dir=/a/b.c is in use (PID 7). Nothing was\nwritten.") == \
        "run_dir=/a/b.c is in use (PID 7)."
    assert len(one_line("x" * 500)) == 200


def test_a_process_ended_locked_only_when_every_failure_it_recorded_was_a_held_run(
        tmp_path: Path) -> None:
    """What a suite reads from a records directory: a sweep that started and did not end may
    have failed jobs it never recorded, so its locked records alone do not make it skipped."""
    def outcome(code: int, *failures: JobFailure, marks: tuple[str, ...] = ()) -> Outcome:
        records = tmp_path / f"records{len(list(tmp_path.iterdir()))}"
        records.mkdir()
        with failures_recorded_in(records):
            for failure in failures:
                record_failure(failure)
        for mark in marks:
            (records / mark).touch()
        assert read_failures(records) == sorted(failures, key=lambda f: f.job or 0)
        return ending(code, records).outcome

    held = JobFailure("rlmem.train", 1, ("seed=1",), "run_dir=r is in use.", locked=True)
    bad = JobFailure("rlmem.train", 0, ("seed=0",), "the PPO loss is nan.", locked=False)
    assert outcome(0) is Outcome.done
    assert outcome(130) is Outcome.interrupted
    assert outcome(1, held) is Outcome.locked  # a single run: its one failure
    assert outcome(1, held, marks=(STARTED, ENDED)) is Outcome.locked
    assert outcome(1, held, marks=(STARTED,)) is Outcome.failed  # the sweep did not end
    assert outcome(1, held, bad, marks=(STARTED, ENDED)) is Outcome.failed
    assert outcome(1) is Outcome.failed  # no record: a traceback, a composition error
    assert outcome(2, held) is Outcome.failed

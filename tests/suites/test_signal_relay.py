"""The suites pass on the signals they receive to the rlmem processes they start
(:mod:`experiments.common.signal_relay`).

A scheduler, ``timeout`` or ``kill -INT <PID>`` signals the suite's process alone. Before the
relay, a SIGINT so sent never reached the running run, which trained on to its end, and the suite
then started the next run; a SIGTERM ended the suite and left its run training. Here the suites
run as they are run, as processes, with tiny real runs, and the test signals the suite's PID
alone.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, assert_stopped_at_its_checkpoint, wait_for
from locations import REPO

from experiments.common.signal_relay import PASSED_ON, SignalRelay, signals_passed_on, stopping
from rlmem.runs.errors import INTERRUPTED
from rlmem.runs.lock import lock_holder
from rlmem.runs.progress import read_progress

LONG = [*(arg for arg in TINY_PPO if not arg.startswith(("frames=", "progress_bar="))),
        "memory.hidden_size=8"]
"""Overrides of a run that takes minutes to reach the suites' frames, a checkpoint each update
(TINY_PPO less what the suites set themselves)."""


def updates_logged(run_dir: Path) -> int:
    progress = run_dir / "progress.csv"
    return len(read_progress(progress)) if progress.exists() else 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ignoring_sigint() -> None:
    """Start ignoring SIGINT, as a script's shell starts its ``&`` commands (and as pytest may
    be started): the suite must take SIGINT all the same."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def suite(*args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -m experiments.<args>`` in the repository's root, started ignoring SIGINT;
    whatever it leaves running
    (the runs in sessions of their own) is killed at the end, by the PIDs holding the runs'
    locks under ``--runs``."""
    process = subprocess.Popen([sys.executable, "-m", *args], cwd=REPO, text=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"},
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=ignoring_sigint)
    runs = Path(args[args.index("--runs") + 1])
    try:
        yield process
    finally:  # the runs first: they hold the suite's output pipes open
        for lock in runs.rglob(".rlmem-run"):
            if (holder := lock_holder(lock.parent)) is not None:
                os.kill(int(holder), signal.SIGKILL)
        if process.poll() is None:
            process.kill()
            process.communicate()


@dataclass(frozen=True)
class Signalled:
    """How a POPGym suite of two long runs ended, signalled (its PID alone) once its first run
    had logged two updates."""

    code: int
    out: str
    err: str
    holder: int
    """The PID that ran the first run."""
    first: Path
    second: Path


def signal_popgym_suite(runs: Path, signum: int) -> Signalled:
    first, second = (runs / "RepeatPreviousEasy" / "lstm" / f"seed{seed}" for seed in (0, 1))
    with suite("experiments.popgym.suite", "--envs", "RepeatPreviousEasy", "--agents", "lstm",
               "--seeds", "0", "1", "--frames", "1000000", "--runs", str(runs), "--",
               *LONG) as process:
        wait_for(lambda: updates_logged(first) > 2)
        holder = lock_holder(first)
        assert holder is not None and int(holder) != process.pid
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    return Signalled(process.returncode, out, err, int(holder), first, second)


def test_sigint_to_the_suite_alone_stops_its_run_at_a_checkpoint_and_starts_no_other(
        tmp_path: Path) -> None:
    ended = signal_popgym_suite(tmp_path, signal.SIGINT)
    assert ended.code == INTERRUPTED, ended.err[-3000:]
    assert "[suite] SIGINT: passed on to the 1 running process; its runs stop at their next " \
        "checkpoint and nothing further starts" in ended.out
    # the run's own Ctrl-C, at a checkpoint:
    assert "Resume with: python -m rlmem.train" in ended.err
    assert "Traceback" not in ended.err
    assert not alive(ended.holder) and lock_holder(ended.first) is None
    assert_stopped_at_its_checkpoint(ended.first)
    assert not ended.second.exists()  # nothing started after the interrupt


def test_sigterm_to_the_suite_alone_ends_its_run_and_then_the_suite_by_sigterm(
        tmp_path: Path) -> None:
    ended = signal_popgym_suite(tmp_path, signal.SIGTERM)
    assert ended.code == -signal.SIGTERM, ended.err[-3000:]
    assert "[suite] SIGTERM: passed on to the 1 running process; the suite ends with them" \
        in ended.out
    assert "FAILED" not in ended.out
    assert not alive(ended.holder) and lock_holder(ended.first) is None
    assert not ended.second.exists()


@pytest.mark.slow
def test_sigint_to_the_suite_alone_reaches_a_sweeps_joblib_workers(tmp_path: Path) -> None:
    """The transfer suite's step is one Hydra sweep whose runs are joblib workers: the
    grandchildren of the suite, in its child's process group."""
    runs = [tmp_path / "DoorKey-5x5" / "lstm" / f"seed{seed}" for seed in (0, 1)]
    with suite("experiments.transfer.suite", "--envs", "DoorKey-5x5", "--memories", "lstm",
               "--seeds", "0", "1", "--frames", "1000000", "--jobs", "2", "--runs",
               str(tmp_path), "--", *LONG) as process:
        wait_for(lambda: all(updates_logged(run) > 2 for run in runs))
        holders = [lock_holder(run) for run in runs]
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=180)
    assert process.returncode == INTERRUPTED, err[-3000:]
    assert "[suite] SIGINT: passed on to the 1 running process; its runs stop" in out
    assert "Traceback" not in err
    for run, holder in zip(runs, holders, strict=True):
        assert holder is not None and not alive(int(holder))
        assert_stopped_at_its_checkpoint(run)
        assert not (run / "eval").exists()  # the suite evaluated nothing after the interrupt


def test_after_a_signal_is_passed_on_no_child_starts(tmp_path: Path) -> None:
    relay = SignalRelay()
    try:
        marker = tmp_path / "started"
        command = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
        assert relay.run(command) == 0 and marker.exists()
        marker.unlink()
        relay.receive(signal.SIGINT)
        wait_for(lambda: relay.passed_on == (signal.SIGINT,), timeout=10)
        assert relay.run(command) == INTERRUPTED
        assert not marker.exists()
    finally:
        relay.close()


def test_the_relay_takes_sigint_always_and_sighup_unless_ignored_and_gives_them_back() -> None:
    hangup = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under nohup
    interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as for `&` in a script
    before = {signum: signal.getsignal(signum) for signum in PASSED_ON}
    try:
        with signals_passed_on() as relay:
            assert signal.getsignal(signal.SIGINT) == relay.receive
            assert signal.getsignal(signal.SIGTERM) == relay.receive
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            assert not stopping()
            with pytest.raises(RuntimeError, match="one relay"), signals_passed_on():
                pass
        assert {signum: signal.getsignal(signum) for signum in before} == before
        assert not stopping()
    finally:
        signal.signal(signal.SIGHUP, hangup)
        signal.signal(signal.SIGINT, interrupt)


STARTS_PROCESSES = ("run_child(", "run_recorded(", "train_step(", "evaluate_step(",
                    "train_all(", "suite.main(")
"""Calls through which an experiments module starts processes, directly or by a suite."""


def subprocess_calls(source: str) -> list[str]:
    """The ``subprocess.<function>(...)`` calls of ``source`` that start a process."""
    return [node.func.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "subprocess"
            and node.func.attr in {"run", "Popen", "call", "check_call", "check_output"}]


def test_every_script_that_starts_processes_passes_its_signals_on() -> None:
    scripts = []
    for path in sorted((REPO / "experiments").rglob("*.py")):
        text = path.read_text()
        if path.name != "signal_relay.py":  # the one place a process is started
            assert not subprocess_calls(text), f"{path} starts a process past the relay"
        if 'if __name__ == "__main__":' in text and any(call in text
                                                         for call in STARTS_PROCESSES):
            scripts.append(path.relative_to(REPO / "experiments").as_posix())
            assert "exit_passing_signals_on(main)" in text, path
    assert {"popgym/suite.py", "memory/suite.py", "transfer/suite.py", "supervised/suite.py",
            "popgym/tune.py", "async_learning/check.py", "supervised/attention_onset.py",
            "supervised/tarnn_divergence.py"} <= set(scripts)

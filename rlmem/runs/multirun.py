"""A Hydra sweep that outlives its failing jobs, and the record each failed job leaves.

Without this, the first job of ``python -m rlmem.train -m agent.lr=1e11,0.001`` that diverges
ends the whole sweep: the CLI reports the error with ``sys.exit(1)``, and ``SystemExit`` passes
through Hydra's launchers. With :class:`SweepFailures` installed as a Hydra callback (the
``hydra.callbacks`` of ``conf/train.yaml`` and ``conf/supervised.yaml``),
:func:`~rlmem.runs.errors.reported_as_cli_errors` reports a job's error, prefixed with the job's
number and overrides, records it as a :class:`JobFailure` and returns, so the launcher goes on
to the next job; at the end of the sweep the callback lists the failed jobs and exits with
status 1.

Ctrl-C ends the whole sweep with status 130. A job stops at its next checkpoint, as a single run
does (:class:`~rlmem.runs.interrupt.GracefulInterrupt`), marks the sweep interrupted in its
records directory (:data:`INTERRUPTED_MARK`) and returns as a finished job would: a launcher
that runs jobs in parallel (joblib) kills the others when one raises, and they are stopping at
their own checkpoints. No job starts after it: in the sweep's own process the sweep ends
before the next job (:meth:`SweepFailures.on_job_start`), and a job a worker process takes up
returns unstarted (:func:`job_of_interrupted_sweep`). In the sweep's own process, while its jobs run
in other processes, the first Ctrl-C waits for them to stop and the second ends the sweep at
once; the second Ctrl-C a job receives stops it at once.

The record crosses processes as a small JSON file per failed job in a directory outside every
run directory: a fresh temporary directory for each sweep (deleted at its end), or the
directory named by the environment variable :data:`RECORDS_ENV`, which a caller that wants to
read the records (a suite telling a locked run from a failed one) chooses and keeps. The
callback carries the directory to the job, whatever process the launcher runs it in: Hydra
pickles its callbacks with each job for the joblib and submitit launchers. On a cluster the
directory must be on a file system the jobs share (``TMPDIR`` or :data:`RECORDS_ENV`); a job
that cannot write its record fails in Hydra's own way instead, so no failure goes unreported.

A single run records its failure too when :data:`RECORDS_ENV` is set, and otherwise behaves as
ever (the message, then exit status 1). :func:`read_failures` reads the records back: the
reproduction suites (``experiments/common/outcome.py``) tell from them whether a run another
process held was skipped rather than failed.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from rlmem.runs.interrupt import INTERRUPTED, SignalHandler

RECORDS_ENV = "RLMEM_FAILURE_RECORDS"
"""A directory where every failing rlmem job or run leaves its :class:`JobFailure` (created if
needed, never emptied by rlmem); unset, a sweep uses a temporary directory of its own."""

INTERRUPTED_MARK = ".sweep-interrupted"
"""Left in a sweep's records directory by a job that Ctrl-C stopped at its checkpoint
(:func:`mark_interrupted`): the jobs after it do not start, and the sweep exits with status 130."""

STARTED, ENDED = ".sweep-started", ".sweep-ended"
"""Marks a sweep leaves in a records directory its caller chose: a sweep that started and did
not end (killed, or stopped by a fault outside its jobs) may have failed jobs it never
recorded."""

REASON_LIMIT = 200
"""The most characters of a failure's one-line reason."""


@dataclass(frozen=True)
class JobFailure:
    """What a failed job (or a single run) left for its sweep's summary."""

    program: str
    """The CLI that failed (``rlmem.train``)."""
    job: int | None
    """The job's number in its sweep (Hydra's ``#0``, ``#1``...); None for a single run."""
    overrides: tuple[str, ...]
    """The job's values of the swept keys (all its overrides when none was swept)."""
    reason: str
    """The first sentence of its error, on one line."""
    locked: bool
    """Another process held the run directory (``RunLockedError``): nothing was tried, and a
    suite counts the run as skipped rather than failed."""

    def describe(self) -> str:
        """``#0 agent.lr=1e11: <reason>`` (``<reason>`` alone for a single run)."""
        name = "" if self.job is None else f"#{self.job} {' '.join(self.overrides)}".rstrip()
        return f"{name}: {self.reason}" if name else self.reason


def one_line(message: str) -> str:
    """The first sentence of ``message`` on one line, at most :data:`REASON_LIMIT` long."""
    flat = " ".join(message.split())
    first = re.split(r"(?<=[.!?])\s", flat, maxsplit=1)[0]
    return first if len(first) <= REASON_LIMIT else first[:REASON_LIMIT - 1] + "…"


@dataclass(frozen=True)
class SweepJob:
    """The sweep job this process is running, as :class:`SweepFailures` announced it."""

    number: int
    overrides: tuple[str, ...]
    """Its values of the swept keys (:attr:`JobFailure.overrides`)."""
    records: Path
    """Where its failure goes."""

    def describe(self) -> str:
        """``job #0 (agent.lr=1e11)``: the prefix of its error message."""
        return f"job #{self.number} ({' '.join(self.overrides)})"


_current_job: SweepJob | None = None
"""Set by :meth:`SweepFailures.on_job_start`, cleared by its ``on_job_end``."""

_stopping = False
"""Ctrl-C was pressed in the sweep's own process: no further job starts there."""

_previous_handler: SignalHandler = None
"""The SIGINT handler before the sweep's own (:func:`_on_ctrl_c`), restored at its end."""


def current_job() -> SweepJob | None:
    """The sweep job this process is running, or None outside a sweep (a single run, or a
    sweep of a config without :class:`SweepFailures`, whose failures end it as before)."""
    return _current_job


def mark_interrupted() -> None:
    """Mark the sweep of the current job interrupted (:data:`INTERRUPTED_MARK`)."""
    job = current_job()
    assert job is not None, "only a job of a sweep marks its sweep"
    job.records.mkdir(parents=True, exist_ok=True)
    (job.records / INTERRUPTED_MARK).touch()


def job_of_interrupted_sweep() -> SweepJob | None:
    """The job this process runs when another job of its sweep marked the sweep interrupted
    (:func:`mark_interrupted`), so that it is not to start; None otherwise."""
    job = current_job()
    return job if job is not None and (job.records / INTERRUPTED_MARK).exists() else None


def record_failure(failure: JobFailure) -> None:
    """Leave ``failure`` for the sweep's summary (the current job's records directory), or for
    whoever set :data:`RECORDS_ENV` around a single run; nothing outside both.

    Raises:
        OSError: the record could not be written.
    """
    job = current_job()
    named = os.environ.get(RECORDS_ENV)
    directory = job.records if job is not None else Path(named) if named else None
    if directory is None:
        return
    directory.mkdir(parents=True, exist_ok=True)
    # Written under a temporary name, then renamed: a reader never sees half a record.
    handle, partial = tempfile.mkstemp(dir=directory, prefix=".", suffix=".part")
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(asdict(failure), file)
        os.replace(partial, Path(partial).with_suffix(".json"))
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def read_failures(directory: Path) -> list[JobFailure]:
    """The failures recorded in ``directory``, in job order (single runs first)."""
    failures = []
    for path in sorted(Path(directory).glob("*.json")):
        fields: dict[str, Any] = json.loads(path.read_text())
        fields["overrides"] = tuple(fields["overrides"])
        failures.append(JobFailure(**fields))
    return sorted(failures, key=lambda failure: -1 if failure.job is None else failure.job)


def swept_keys(overrides: Sequence[str], params: dict[str, Any] | None = None) -> set[str]:
    """The keys a sweep varies: those whose command-line override is a sweep (``a=1,2``,
    ``range(3)``, ``choice(...)``), and those of the sweeper's ``params``."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    return {override.key_or_group for override in parsed if override.is_sweep_override()} | set(
        params or {})


def job_overrides(overrides: Sequence[str], swept: set[str]) -> tuple[str, ...]:
    """A job's overrides that name it within its sweep: those of the swept keys (all of them
    when none is, as in a sweep of one job)."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    named = tuple(text for text, override in zip(overrides, parsed, strict=True)
                  if override.key_or_group in swept)
    return named or tuple(overrides)


def _interrupted() -> None:
    """End the sweep as Ctrl-C ends a single run."""
    print("interrupted: the sweep ends here; run the same sweep again to resume it",
          file=sys.stderr, flush=True)
    raise SystemExit(INTERRUPTED)


def _on_ctrl_c(signum: int, frame: FrameType | None) -> None:
    """SIGINT in the sweep's own process (see the module's docstring)."""
    global _stopping
    if _current_job is not None:  # a job runs here, outside its trainer's safe points
        raise KeyboardInterrupt
    if _stopping:
        _interrupted()
    _stopping = True
    print("\nCtrl-C: the sweep ends once its running jobs have stopped at their next "
          "checkpoint (press again to end it at once)", file=sys.stderr, flush=True)


class SweepFailures(Callback):
    """The Hydra callback that lets a sweep go on past a failed job and ends it with the list
    of failed jobs (see the module's docstring).

    Its state (the records directory and the swept keys) is set in the sweep's own process by
    :meth:`on_multirun_start`; the launchers pickle the callback with each job, so the job's
    process finds them in :meth:`on_job_start`, wherever it runs. In a single run it does
    nothing.
    """

    def __init__(self) -> None:
        self.records: Path | None = None
        self.owned = False
        """The records directory is this sweep's temporary one, to delete at its end."""
        self.swept: set[str] = set()
        self.sweep_process: tuple[str, int] | None = None
        """The host and PID of the sweep's own process, where the basic launcher runs its jobs
        too (the launchers pickle the callback to the others)."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _previous_handler
        if threading.current_thread() is threading.main_thread():
            _previous_handler = signal.signal(signal.SIGINT, _on_ctrl_c)
        named = os.environ.get(RECORDS_ENV)
        if named:
            self.records = Path(named)
            self.records.mkdir(parents=True, exist_ok=True)
            (self.records / STARTED).touch()
            (self.records / INTERRUPTED_MARK).unlink(missing_ok=True)  # an earlier sweep's
        else:
            self.records = Path(tempfile.mkdtemp(prefix="rlmem-sweep-"))
            self.owned = True
            # Ctrl-C ends the sweep before on_multirun_end: remove the directory anyway.
            atexit.register(shutil.rmtree, self.records, ignore_errors=True)
        task = OmegaConf.to_container(config.hydra.overrides.task)
        params = OmegaConf.select(config, "hydra.sweeper.params")
        params = OmegaConf.to_container(params) if isinstance(params, DictConfig) else None
        assert isinstance(task, list) and (params is None or isinstance(params, dict))
        self.swept = swept_keys([str(override) for override in task], params)
        self.sweep_process = (socket.gethostname(), os.getpid())

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        global _current_job
        if self.records is None:  # a single run
            return
        here = self.sweep_process == (socket.gethostname(), os.getpid())
        if here and (_stopping or (self.records / INTERRUPTED_MARK).exists()):
            _interrupted()  # Ctrl-C between two jobs of the basic launcher, or during the last
        task = OmegaConf.to_container(config.hydra.overrides.task)
        assert isinstance(task, list)
        _current_job = SweepJob(int(config.hydra.job.num),
                                job_overrides([str(override) for override in task],
                                              self.swept), self.records)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        global _current_job
        _current_job = None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.records is None:
            return
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _previous_handler)
        failures = read_failures(self.records)
        interrupted = _stopping or (self.records / INTERRUPTED_MARK).exists()
        if self.owned:
            shutil.rmtree(self.records, ignore_errors=True)
        else:
            (self.records / ENDED).touch()
        if interrupted:  # its jobs have stopped at their checkpoints
            _interrupted()
        if not failures:
            return
        program, many = failures[0].program, len(failures) > 1
        failed = f"{len(failures)} jobs" if many else "1 job"
        output = "their errors are in their output" if many else "its error is in its output"
        lines = [f"{program}: {failed} of this sweep failed ({output}, above or in the "
                 "launcher's job logs); the other jobs ran. What a failed job had saved "
                 "before its error is intact: fix the cause and run the same sweep again "
                 "(finished runs return at once, the others resume). Failed:",
                 *(f"  {failure.describe()}" for failure in failures)]
        print("\n".join(lines), file=sys.stderr, flush=True)
        sys.exit(1)

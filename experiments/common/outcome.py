"""How an rlmem process (a run, an evaluation, a sweep) ended, as a suite counts it: read from
the failure records it left (:mod:`rlmem.runs.multirun`).

An rlmem CLI started with :data:`~rlmem.runs.multirun.RECORDS_ENV` set leaves a
:class:`~rlmem.runs.multirun.JobFailure` there for each failed run or sweep job, and a sweep
marks that directory when it starts and when it reaches its end. :func:`run_recorded` runs a
command so and tells from the records how it ended (:class:`Outcome`): the suites skip a run
another process holds instead of counting it failed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from experiments.common.signal_relay import run_child
from rlmem.runs.errors import INTERRUPTED
from rlmem.runs.multirun import ENDED, RECORDS_ENV, STARTED, JobFailure, read_failures


class Outcome(Enum):
    """How an rlmem process (a run, an evaluation, a sweep) ended, as a suite counts it."""

    done = "done"
    locked = "locked"
    """It failed only on runs (or evaluations) another process holds: nothing was tried there,
    so a suite reports them skipped."""
    failed = "failed"
    interrupted = "interrupted"


@dataclass(frozen=True)
class Ending:
    """An rlmem process's :class:`Outcome`, its exit status and the failures it recorded."""

    outcome: Outcome
    code: int
    failures: tuple[JobFailure, ...]


def ending(code: int, records: Path) -> Ending:
    """How a process that exited with ``code`` ended, from the failures it recorded in
    ``records`` (its own directory, fresh for it). It ended ``locked`` when it failed (status
    1) having recorded only locked runs, and recorded all of its failures: a single run records
    its one failure, a sweep every failed job, unless it did not reach its end."""
    failures = tuple(read_failures(records))
    if code == 0:
        return Ending(Outcome.done, code, failures)
    if code == INTERRUPTED:
        return Ending(Outcome.interrupted, code, failures)
    complete = (records / ENDED).exists() or not (records / STARTED).exists()
    if code == 1 and failures and complete and all(failure.locked for failure in failures):
        return Ending(Outcome.locked, code, failures)
    return Ending(Outcome.failed, code, failures)


def run_recorded(command: Sequence[str], **kwargs: Any) -> Ending:
    """``subprocess.run(command, **kwargs)`` of an rlmem CLI (through
    :func:`~experiments.common.signal_relay.run_child`) with its failures recorded in a fresh
    temporary directory (:data:`RECORDS_ENV`; ``env`` is the parent's unless given), and how it
    ended."""
    with tempfile.TemporaryDirectory(prefix="rlmem-records-") as records:
        env = {**kwargs.pop("env", os.environ), RECORDS_ENV: records}
        return ending(run_child(command, env=env, **kwargs), Path(records))


@contextmanager
def failures_recorded_in(directory: Path) -> Iterator[Path]:
    """Set :data:`RECORDS_ENV` to ``directory`` for the block, so rlmem processes started in it
    (a sweep, a run) leave their failures there for the caller to read."""
    previous = os.environ.get(RECORDS_ENV)
    os.environ[RECORDS_ENV] = str(directory)
    try:
        yield directory
    finally:
        if previous is None:
            del os.environ[RECORDS_ENV]
        else:
            os.environ[RECORDS_ENV] = previous


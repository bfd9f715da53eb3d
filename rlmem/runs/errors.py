"""The faults a run reports to its user in one paragraph, and the CLIs' way of reporting them.

Each message says what happened, what is safe on disk, and what to do.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

from rlmem.runs.interrupt import INTERRUPTED


class RunInterrupted(BaseException):
    """Ctrl-C stopped the run at a checkpoint, which holds its last finished step (its message is
    printed already), or a job of an interrupted sweep was not started. A ``BaseException``, as
    the ``KeyboardInterrupt`` it stands for: no handler of faults catches it on its way to
    :func:`reported_as_cli_errors`."""


class NonFiniteLossError(FloatingPointError):
    """A loss, a gradient, the weights or the policy became NaN or infinite; the bad state was
    neither applied nor saved, so the checkpoint on disk is the last good one."""


class RunError(RuntimeError):
    """A fault of the run's surroundings (its directory, its disk, its checkpoint file)."""


class CheckpointWriteError(RunError):
    """The checkpoint could not be written; the previous one is intact."""


class UnreadableCheckpointError(RunError):
    """A checkpoint file exists but cannot be read (truncated, corrupt, not a checkpoint)."""


class RunLockedError(RunError):
    """Another live process holds the run directory."""


class RunDirectoryError(RunError):
    """The run directory cannot be created or written."""


USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, NonFiniteLossError,
                                                RunError)
"""Bad input (unknown names, wrong values, a checkpoint of another config: all ValueError or
KeyError), a diverged run, or a fault of the run's surroundings: reported in one message, not a
traceback."""


@contextmanager
def reported_as_cli_errors(program: str) -> Iterator[None]:
    """Turn :data:`USER_ERRORS` raised inside the block into ``<program>: error: ...`` on
    stderr and exit status 1, a run stopped at its checkpoint by Ctrl-C (:class:`RunInterrupted`)
    into exit status 130, and Ctrl-C outside a trainer's safe points into one line and exit
    status 130.

    In a job of a Hydra sweep run with :class:`~rlmem.runs.multirun.SweepFailures`, an error
    (a user error, or any other exception, then with its traceback) is reported with the job's
    number and overrides and recorded for the sweep's summary, and the block returns: the
    sweep goes on to its next job and exits with status 1 at its end. Ctrl-C still ends the
    whole sweep (status 130): a job it stopped at a checkpoint marks the sweep interrupted and
    returns, so that a launcher running jobs in parallel waits for the others to stop at
    theirs too (:func:`~rlmem.runs.multirun.mark_interrupted`); a second Ctrl-C ends them at
    once.
    """
    from rlmem.runs.multirun import current_job, mark_interrupted  # it builds on this module

    try:
        yield
    except RunInterrupted:
        if current_job() is None:
            sys.exit(INTERRUPTED)
        mark_interrupted()
    except USER_ERRORS as error:
        # KeyError's str() adds quotes around the message; print its text as written.
        message = str(error.args[0] if isinstance(error, KeyError) and error.args else error)
        _failed(program, error, message)
    except KeyboardInterrupt:
        print(f"{program}: interrupted", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)
    except Exception as error:
        if current_job() is None:
            raise  # a single run: Hydra prints the traceback, as ever
        traceback.print_exc()  # a fault of rlmem, not of the input: the traceback helps
        _failed(program, error, f"{type(error).__name__}: {error}")


def _failed(program: str, error: BaseException, message: str) -> None:
    """Report ``error`` and record it (:func:`~rlmem.runs.multirun.record_failure`); exit with
    status 1 unless this is a job of a sweep that goes on."""
    from rlmem.runs.multirun import JobFailure, current_job, one_line, record_failure

    job = current_job()
    where = "" if job is None else f"{job.describe()}: "
    print(f"{program}: error: {where}{message}", file=sys.stderr, flush=True)
    failure = JobFailure(program, None if job is None else job.number,
                         () if job is None else job.overrides, one_line(message),
                         locked=isinstance(error, RunLockedError))
    try:
        record_failure(failure)
    except OSError as cannot:
        print(f"{program}: this failure could not be recorded ({cannot})", file=sys.stderr,
              flush=True)
        if job is not None:
            # Then the job fails in Hydra's own way, which still reports it when the sweep ends.
            raise error from None
    if job is None:
        sys.exit(1)

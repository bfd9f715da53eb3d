"""The faults a run reports to its user in one paragraph, and the CLIs' way of reporting them.

Each message says what happened, what is safe on disk, and what to do.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""


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
    stderr and exit status 1, and Ctrl-C outside a trainer's safe points into one line and
    exit status 130."""
    try:
        yield
    except USER_ERRORS as error:
        # KeyError's str() adds quotes around the message; print its text as written.
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"{program}: error: {message}", file=sys.stderr, flush=True)
        sys.exit(1)
    except KeyboardInterrupt:
        print(f"{program}: interrupted", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)

"""The errors a run reports to its user in one line, and the CLIs' way of reporting them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class NonFiniteLossError(FloatingPointError):
    """A loss (or gradient) became NaN or infinite; the update was not applied, so the last
    checkpoint on disk is a good one."""


USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, NonFiniteLossError)
"""Bad input (unknown names, wrong values, a checkpoint of another config: all ValueError or
KeyError) or a diverged run: reported in one message, not a traceback."""


@contextmanager
def reported_as_cli_errors(program: str) -> Iterator[None]:
    """Turn :data:`USER_ERRORS` raised inside the block into ``<program>: error: ...`` on
    stderr and exit status 1."""
    try:
        yield
    except USER_ERRORS as error:
        # KeyError's str() adds quotes around the message; print its text as written.
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        print(f"{program}: error: {message}", file=sys.stderr, flush=True)
        sys.exit(1)

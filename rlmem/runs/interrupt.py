"""Ctrl-C that stops a run at its next safe point instead of in the middle of an update."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeAlias

INTERRUPTED = 130
"""Exit status after Ctrl-C (128 + SIGINT), as shells report it."""

SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | None
"""What ``signal.signal`` installs and returns: a function, ``SIG_DFL``/``SIG_IGN``, or None
(a handler not installed from Python)."""


class GracefulInterrupt:
    """While active, the first SIGINT only sets :attr:`requested`; the trainer checks it after
    each checkpoint and stops there. A second SIGINT interrupts at once (KeyboardInterrupt),
    for a run stuck between safe points. Outside the main thread (a joblib worker) it does
    nothing, and SIGINT keeps its default behaviour.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: SignalHandler = None
        self._active = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nCtrl-C: stopping at the next checkpoint (press again to stop at once)",
              flush=True)

    def __enter__(self) -> GracefulInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._active = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if self._active:
            signal.signal(signal.SIGINT, self._previous)
            self._active = False

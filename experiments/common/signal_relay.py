"""The rlmem processes a suite starts, and the signals it passes on to them.

A suite runs its runs and evaluations as child processes (``python -m rlmem.train``, a Hydra
sweep of them, ``python -m rlmem.evaluate``). Whoever stops a suite signals the suite: Ctrl-C
at its terminal, but just as often ``kill -INT <PID>``, ``timeout``, or a scheduler, which
reach the suite's process alone. So each child runs in a session of its own, where nothing
but the suite signals it, and the suite passes on what it receives (:class:`SignalRelay`):

- **SIGINT** (Ctrl-C) goes to every running child's process group, so a run and a sweep's
  joblib workers stop at their next checkpoint, as after Ctrl-C at their own terminal
  (:class:`~rlmem.runs.interrupt.GracefulInterrupt`); no child starts after it, and the suite
  exits with status 130 once they have stopped. A second SIGINT is passed on too: they stop at
  once.
- **SIGTERM** and **SIGHUP** go to the children likewise, which end at once by default; the
  suite ends by the same signal once they have (:func:`exit_passing_signals_on`), so that
  whatever started it sees how it ended.

SIGHUP stays ignored when the suite was started ignoring it (under ``nohup``). SIGINT is taken
even then, as ``rlmem.train`` takes it (:class:`~rlmem.runs.interrupt.GracefulInterrupt`): a
shell without job control (a script) starts its ``&`` commands ignoring SIGINT, and ``kill
-INT`` must still stop such a suite.

The relay is process-wide, as signal handlers are: :func:`run_child` uses the one
:func:`signals_passed_on` installed, and without one it is plain ``subprocess.run`` in the
suite's own session (a terminal's Ctrl-C then reaches the child itself).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from types import FrameType
from typing import Any, NoReturn

from rlmem.runs.errors import INTERRUPTED, reported_as_cli_errors
from rlmem.runs.interrupt import SignalHandler

PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals a suite passes on to its children."""


class SignalRelay:
    """The running children of a suite, and the signals passed on to them.

    The signal handler (:meth:`receive`) only queues the signal: it runs in the main thread,
    between any two bytecodes, perhaps while that thread holds the lock :meth:`run` takes. A
    thread of the relay's own sends each queued signal to every running child under that lock,
    so a child is either running when a signal is passed on, and gets it, or is not started.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen[Any]] = set()
        self._passed_on: list[int] = []
        """The signals passed on so far, in order: none until the suite is told to stop."""
        self._queue: queue.SimpleQueue[int | None] = queue.SimpleQueue()  # re-entrant: a
        # handler may put while the main thread is inside put
        self._thread = threading.Thread(target=self._pass_on, name="signal relay", daemon=True)
        self._thread.start()

    @property
    def passed_on(self) -> tuple[int, ...]:
        """The signals passed on so far; after the first, no child starts."""
        with self._lock:
            return tuple(self._passed_on)

    def receive(self, signum: int, frame: FrameType | None = None) -> None:
        """The handler of :data:`PASSED_ON`: queue ``signum`` to be passed on."""
        self._queue.put(signum)

    def run(self, command: Sequence[str], **kwargs: Any) -> int:
        """``subprocess.run(command, **kwargs)``'s exit status, the child in a session of its
        own; :data:`~rlmem.runs.errors.INTERRUPTED` without starting it once a signal has been
        passed on, and when a signal passed on ended it."""
        with self._lock:
            if self._passed_on:
                return INTERRUPTED
            process = subprocess.Popen(list(command), start_new_session=True, **kwargs)
            self._running.add(process)
        try:
            code = process.wait()
        finally:
            with self._lock:
                self._running.discard(process)
        return INTERRUPTED if -code in self.passed_on else code

    def close(self) -> None:
        """Pass on what is queued, then end the relay's thread."""
        self._queue.put(None)
        self._thread.join()

    def _pass_on(self) -> None:
        while (signum := self._queue.get()) is not None:
            with self._lock:
                self._passed_on.append(signum)
                for process in self._running:
                    with suppress(ProcessLookupError):  # it has just ended
                        os.killpg(process.pid, signum)  # the child leads its process group
                said = announcement(signum, again=self._passed_on.count(signum) > 1,
                                    running=len(self._running))
            print(f"[suite] {said}", flush=True)


def announcement(signum: int, again: bool, running: int) -> str:
    """What the suite says when it passes ``signum`` on (``again``: not for the first time)
    to ``running`` processes."""
    name = signal.Signals(signum).name
    to = f"passed on to the {running} running process{'' if running == 1 else 'es'}"
    if signum != signal.SIGINT:
        return f"{name}: {to}; the suite ends with them"
    if again:
        return f"{name} again: {to}; its runs stop at once"
    return (f"{name}: {to}; its runs stop at their next checkpoint and nothing further starts "
            "(again to stop them at once)")


_relay: SignalRelay | None = None
"""The relay :func:`signals_passed_on` installed: one per process, as signal handlers are."""


@contextmanager
def signals_passed_on() -> Iterator[SignalRelay]:
    """For the block, the signals of :data:`PASSED_ON` this process receives are passed on to
    the children :func:`run_child` starts (in the main thread only, where handlers live)."""
    global _relay
    if _relay is not None or threading.current_thread() is not threading.main_thread():
        raise RuntimeError("signals_passed_on: one relay, installed by the main thread")
    relay = SignalRelay()
    previous: dict[int, SignalHandler] = {}
    for signum in PASSED_ON:
        if signum != signal.SIGHUP or signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, relay.receive)
    _relay = relay
    try:
        yield relay
    finally:
        for caught, handler in previous.items():
            signal.signal(caught, handler)
        _relay = None
        relay.close()


def run_child(command: Sequence[str], **kwargs: Any) -> int:
    """``subprocess.run(command, **kwargs)``'s exit status, through the installed relay
    (:meth:`SignalRelay.run`) if there is one."""
    if _relay is None:
        return subprocess.run(list(command), check=False, **kwargs).returncode
    return _relay.run(command, **kwargs)


def stopping() -> bool:
    """Whether the installed relay has passed a signal on: the suite starts nothing more."""
    return _relay is not None and bool(_relay.passed_on)


def exit_passing_signals_on(main: Callable[[], int]) -> NoReturn:
    """``sys.exit(main())`` with the signals passed on (:func:`signals_passed_on`); after a
    SIGTERM or SIGHUP, end by that signal instead, its default action restored. A fault of the
    input (a run's config or report that something else tore) ends in one paragraph
    (:func:`~rlmem.runs.errors.reported_as_cli_errors`)."""
    module = sys.modules.get(main.__module__)
    spec = getattr(module, "__spec__", None)  # python -m <name>: its __name__ is __main__
    program = spec.name if spec is not None else main.__module__
    with signals_passed_on() as relay, reported_as_cli_errors(program):
        code = main()
    ending = [signum for signum in relay.passed_on if signum != signal.SIGINT]
    if ending:
        signal.signal(ending[0], signal.SIG_DFL)
        os.kill(os.getpid(), ending[0])
    sys.exit(code)

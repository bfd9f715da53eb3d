"""``python -m <cli> args...`` without paying the imports each time: a zygote process.

Most of a tiny CLI run's time is importing torch, Hydra, gymnasium and MiniGrid (some 5 s of a
core each time, against 1-2 s of work), and the test suite runs the CLIs a few hundred times.
The zygote imports those once, computes nothing, and forks a child per command. The child
becomes what ``python -m module args`` would be: its own process group (and umask, where
given), ``cwd`` (on
``sys.path`` first, as ``-m`` puts it), the environment given, standard input from
``/dev/null``, output to the files given, ``sys.argv``, and the
module run as ``__main__`` by :func:`runpy.run_module`; at the end, as the interpreter does: a
``SystemExit``'s code, a traceback and 1 for an uncaught exception, death by SIGINT for an
uncaught ``KeyboardInterrupt``, non-daemon threads joined, ``atexit`` handlers run, output
flushed.

What differs from a fresh interpreter: the modules imported here (:data:`PRELOADED`) were
imported once, under the zygote's environment, so an environment variable read at import time
would not be seen (rlmem reads its own at call time), and import-time side effects happened
before the command. A command whose ``PYTHONPATH`` is not the zygote's (a test that installs a
plugin there: the cell registry read the installed entry points when it was imported) is not
one the zygote can serve (:meth:`Zygote.serves`): it runs in a fresh process. Tests about a
fresh process itself (what ``import rlmem`` imports, signals sent to a running CLI) start real
subprocesses; ``RLMEM_TESTS_FRESH_PROCESSES=1`` sends every CLI of the suite to one.

The protocol: one JSON request per line on the zygote's standard input, one JSON reply per line
on its standard output (:class:`Zygote` is the client).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

PRELOADED = ("torch", "numpy", "hydra", "omegaconf", "gymnasium", "minigrid", "rlmem.agents",
             "rlmem.schema.train", "rlmem.tasks", "rlmem.runs")
"""What the zygote imports before its first fork: the slow imports every CLI shares, not the
CLIs' own modules (``rlmem.train``, ...), which each child runs afresh as ``__main__``."""

FRESH = "RLMEM_TESTS_FRESH_PROCESSES"
"""Set to 1: every CLI of the suite in a fresh ``python -m`` process instead."""


def _exit_code(error: SystemExit) -> int:
    """The status an interpreter exits with for ``error``, printing a message code as it does."""
    if error.code is None:
        return 0
    if isinstance(error.code, int):
        return error.code
    print(error.code, file=sys.stderr)
    return 1


def _become(request: dict[str, Any]) -> None:
    """In the forked child: become ``python -m module args`` and exit as it would."""
    os.setpgid(0, 0)
    if request["umask"] is not None:
        os.umask(request["umask"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[0] = request["cwd"]
    for fd, (path, flags) in enumerate(((os.devnull, os.O_RDONLY),
                                        (request["out"], os.O_WRONLY),
                                        (request["err"], os.O_WRONLY))):
        target = os.open(path, flags)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = [request["module"], *request["args"]]
    sys.modules.pop(request["module"], None)
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as error:
        code = _exit_code(error)
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:  # the interpreter's own report of an uncaught exception
        traceback.print_exc()
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


def _run(request: dict[str, Any]) -> dict[str, Any]:
    """Fork a child for ``request`` and wait for it, killing its process group after the
    request's timeout."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            _become(request)
        finally:
            os._exit(70)  # not reached unless becoming failed
    deadline = time.monotonic() + request["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return {"returncode": os.waitstatus_to_exitcode(status), "timed_out": False}
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return {"returncode": -signal.SIGKILL, "timed_out": True}
        time.sleep(0.005)


def serve() -> None:
    """Import :data:`PRELOADED`, then answer requests until standard input closes."""
    for name in PRELOADED:
        __import__(name)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(_run(json.loads(line))), flush=True)


class Zygote:
    """The test process's side: starts the zygote on first use, sends it commands."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self._pythonpath: str | None = None
        """The ``PYTHONPATH`` the zygote was started with."""
        self._scratch = Path(tempfile.mkdtemp(prefix="rlmem-cli-zygote-"))
        """Where each command's output is written, then read back."""

    def _started(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            self._pythonpath = env.get("PYTHONPATH")
            self._process = subprocess.Popen(
                [sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env=env, text=True)
            assert self._process.stdout is not None
            assert json.loads(self._process.stdout.readline()) == {"ready": True}
            atexit.register(self.close)
        return self._process

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a command with ``env`` runs here as in a fresh interpreter: its
        ``PYTHONPATH`` is the zygote's (or the zygote's to be, before it starts), so the same
        modules and entry points are found."""
        started = self._process is not None and self._process.poll() is None
        return (env.get("PYTHONPATH") == self._pythonpath if started
                else env.get("PYTHONPATH") == os.environ.get("PYTHONPATH"))

    def run(self, module: str, args: list[str], cwd: Path, env: dict[str, str],
            timeout: float, umask: int | None = None) -> subprocess.CompletedProcess[str]:
        """``python -m module args`` in ``cwd`` with ``env`` (and ``umask``, where given), as
        :func:`subprocess.run` with ``capture_output=True, text=True`` would return it; raises
        :class:`subprocess.TimeoutExpired` after ``timeout`` seconds."""
        command = [sys.executable, "-m", module, *args]
        out, err = self._scratch / "stdout", self._scratch / "stderr"
        out.write_bytes(b"")
        err.write_bytes(b"")
        process = self._started()
        assert process.stdin is not None and process.stdout is not None
        request = {"module": module, "args": list(args), "cwd": str(cwd), "env": env,
                   "timeout": timeout, "umask": umask, "out": str(out), "err": str(err)}
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        reply = json.loads(process.stdout.readline())
        stdout = out.read_text(errors="replace")
        stderr = err.read_text(errors="replace")
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, reply["returncode"], stdout, stderr)

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout=30)
        for name in ("stdout", "stderr"):
            (self._scratch / name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self._scratch.rmdir()


if __name__ == "__main__":
    serve()

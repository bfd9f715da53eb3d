"""One process per run directory: an advisory lock held for the life of a run.

The lock is ``fcntl.flock`` on ``<run_dir>/.lock``. The kernel releases it when its holder
exits, however it exits, so a lock left by a killed process never blocks the next run. The file
holds the holder's PID, which a refused process names.
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from types import TracebackType

from rlmem.runs.errors import RunDirectoryError, RunLockedError

LOCK_NAME = ".lock"


def lock_holder(run_dir: Path, name: str = LOCK_NAME) -> str | None:
    """The PID written in ``run_dir``'s lock while a live process holds it; None when it is
    free, or when there is no lock file (or it is a link, which no run would have made)."""
    try:
        fd = os.open(Path(run_dir) / name, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


class RunLock:
    """Hold ``<run_dir>/.lock`` exclusively, or fail at once naming the holder.

    Args:
        run_dir: the run directory (created if needed).
        name: the lock file's name; another name locks one job within the run (an evaluation
            holds ``eval/.<env>.lock``, so two evaluations of one run and env cannot race).
        what: what the lock guards, for the message (``run_dir=<run_dir>``).

    Raises:
        RunLockedError: another live process holds the lock.
        RunDirectoryError: the directory cannot be created or written, or the lock file is a
            symlink.
    """

    def __init__(self, run_dir: Path, name: str = LOCK_NAME, what: str | None = None) -> None:
        self.path = Path(run_dir) / name
        self.what = what or f"run_dir={run_dir}"
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NOFOLLOW: a .lock planted as a symlink must not truncate its target below.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise RunDirectoryError(
                    f"{self.path} is a symlink ({os.readlink(self.path)}); rlmem does not write "
                    "through links, since that could reach any file. Nothing was written. "
                    "Remove the link or choose another run_dir.") from error
            raise RunDirectoryError(
                f"cannot write into run_dir={self.path.parent}: {error}. Nothing was written; "
                "choose a writable run_dir.") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunLockedError(
                f"{self.what} is in use by another process (PID {holder}). Nothing was "
                "written. Wait for it to finish, stop it, or choose another run_dir.") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

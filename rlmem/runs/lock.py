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

from rlmem.runs.errors import RunDirectoryError, RunLockedError, UnwritableRunError
from rlmem.runs.files import NEW_FILE_MODE

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
        elsewhere: the other choice a refused user has, ending the messages (``choose another
            run_dir``); None where the program has none.

    Raises:
        RunLockedError: another live process holds the lock.
        UnwritableRunError: the directory cannot be created or written (a full disk, a
            read-only one); neither the lock file nor a folder made for it is left.
        RunDirectoryError: the lock file is a symlink.
    """

    def __init__(self, run_dir: Path, name: str = LOCK_NAME, what: str | None = None,
                 elsewhere: str | None = "choose another run_dir") -> None:
        self.path = Path(run_dir) / name
        self.what = what or f"run_dir={run_dir}"
        self.elsewhere = elsewhere
        self._fd: int | None = None

    def _or_elsewhere(self, first: str) -> str:
        """``first``, or ``first, or <elsewhere>``, as the end of a sentence."""
        return f"{first}, or {self.elsewhere}" if self.elsewhere else first

    def acquire(self) -> None:
        made = [folder for folder in (self.path.parent, *self.path.parent.parents)
                if not folder.exists()]
        existed = self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_NOFOLLOW: a .lock planted as a symlink must not truncate its target below.
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, NEW_FILE_MODE)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise RunDirectoryError(
                    f"{self.path} is a symlink ({os.readlink(self.path)}); rlmem does not write "
                    "through links, since that could reach any file. Nothing was written. "
                    f"{self._or_elsewhere('Remove the link')}.") from error
            self._undo(made, existed)
            raise self._unwritable(error) from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise RunLockedError(
                f"{self.what} is in use by another process (PID {holder}). Nothing was "
                f"written. {self._or_elsewhere('Wait for it to finish, stop it')}.") from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as error:  # a full disk: the file was made, its PID cannot be written
            os.close(fd)
            self._undo(made, existed)
            raise self._unwritable(error) from error
        self._fd = fd

    def _unwritable(self, error: OSError) -> UnwritableRunError:
        return UnwritableRunError(
            f"cannot write into {self.path.parent} ({error.strerror or error}), so "
            f"{self.what} cannot be locked. Nothing was written; "
            f"{self.elsewhere or 'free some space or make it writable'}.")

    def _undo(self, made: list[Path], existed: bool) -> None:
        """Remove the lock file and the folders :meth:`acquire` made, where it could not take
        the lock: a failed attempt leaves nothing behind."""
        try:
            if not existed:
                self.path.unlink(missing_ok=True)
            for folder in made:
                folder.rmdir()
        except OSError:
            pass  # not empty, or not ours to remove after all: left as it is

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

"""How rlmem writes a file: whole or not at all, and never through a link.

Every file a run writes besides its checkpoint (``config.yaml``, a rewrite of ``progress.csv``,
``eval/*.json``, ``results.json``) goes through :func:`write_atomic`: the bytes go to a new
temporary file beside the target (created with ``O_EXCL``, so it can be no planted link), are
flushed to disk, and then :func:`os.replace` puts it in place. A reader sees the old file or
the new one, never a part; a kill or a full disk leaves the old one intact; and a symlink
planted at the target is replaced, never followed, so nothing outside the run is written.
Appends (a row of ``progress.csv``) open the file with ``O_NOFOLLOW`` (:func:`append_text`).

A written file gets the mode a plain ``open(path, "w")`` would give it: the mode of the file it
replaces, or ``0o666`` less the process's umask for a new one (:func:`file_mode`), not the
``0o600`` of a temporary file. A kill leaves at most a temporary file of rlmem's own name,
``.<name>.<8 characters>.tmp`` (:func:`is_temporary_of`), which the next run removes.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Any

NEW_FILE_MODE = 0o666
"""The mode a new file is opened with, before the umask: what ``open(path, "w")`` uses."""


def umask() -> int:
    """The process's umask, read without changing it where Linux shows it (``/proc``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore it at once
    os.umask(mask)
    return mask


def file_mode(path: Path) -> int:
    """The permission bits a write of ``path`` gives it: those of the file there now (a link
    there is replaced, not followed, so it has none), else ``0o666`` less the umask."""
    try:
        found = os.lstat(path)
    except OSError:
        found = None
    if found is not None and stat.S_ISREG(found.st_mode):
        return stat.S_IMODE(found.st_mode)
    return NEW_FILE_MODE & ~umask()


def temporary_file(path: Path) -> tuple[int, str]:
    """A new temporary file beside ``path`` (``O_EXCL``: no planted link), of the mode its
    replacement of ``path`` is to have (:func:`file_mode`): an open descriptor and its name."""
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, file_mode(path))
    except OSError:
        os.close(handle)
        Path(tmp).unlink(missing_ok=True)
        raise
    return handle, tmp


def is_temporary_of(entry: Path, name: str) -> bool:
    """Whether ``entry`` is a temporary file :func:`temporary_file` made for a file ``name``
    (``.<name>.<8 random characters>.tmp``), which a killed write may leave behind."""
    return re.fullmatch(rf"\.{re.escape(name)}\.[a-z0-9_]{{8}}\.tmp", entry.name) is not None


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` by ``data`` atomically (text is written as UTF-8), keeping the mode of
    the file it replaces (a new one's honours the umask: :func:`file_mode`).

    Raises:
        OSError: the file could not be written; ``path`` is as it was.
    """
    payload = data.encode() if isinstance(data, str) else data
    handle, tmp = temporary_file(path)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, value: Any) -> None:
    """``value`` as indented JSON, atomically (:func:`write_atomic`)."""
    write_atomic(path, json.dumps(value, indent=2) + "\n")


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (created if absent) in one write, refusing to follow a
    symlink there.

    Raises:
        OSError: ``ELOOP`` when ``path`` is a symlink; any other failure to write.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, NEW_FILE_MODE)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)

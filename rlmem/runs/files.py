"""How rlmem writes a file: whole or not at all, and never through a link.

Every file a run writes besides its checkpoint (``config.yaml``, a rewrite of ``progress.csv``,
``eval/*.json``, ``results.json``) goes through :func:`write_atomic`: the bytes go to a new
temporary file beside the target (created with ``O_EXCL``, so it can be no planted link), are
flushed to disk, and then :func:`os.replace` puts it in place. A reader sees the old file or
the new one, never a part; a kill or a full disk leaves the old one intact; and a symlink
planted at the target is replaced, never followed, so nothing outside the run is written.
Appends (a row of ``progress.csv``) open the file with ``O_NOFOLLOW`` (:func:`append_text`).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` by ``data`` atomically (text is written as UTF-8).

    Raises:
        OSError: the file could not be written; ``path`` is as it was.
    """
    payload = data.encode() if isinstance(data, str) else data
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
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
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)

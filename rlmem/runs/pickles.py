"""What a pickle would build, read without building it: the Python objects a file names.

``torch.load(weights_only=True)`` refuses a checkpoint that pickles an object outside its
allowlist, and it reports a truncated pickle stream with the same exception type. The two call
for opposite advice: a truncated file was damaged and can be deleted, while a well-formed file
that names Python classes was made to hold objects no rlmem checkpoint contains, and may have
been crafted to run code when loaded. :func:`pickled_globals` tells them apart by reading the
opcodes with :mod:`pickletools`, which only parses the stream and never imports or calls
anything.
"""

from __future__ import annotations

import io
import os
import pickletools
import re
import zipfile
from pathlib import Path

PICKLE_MEMBER = "data.pkl"
"""The member of a zip checkpoint (``torch.save``'s format) that holds its pickle stream."""

CHECKPOINT_GLOBALS = ("torch.", "collections.OrderedDict")
"""What an rlmem checkpoint's pickle names: tensors and their storages, and state dicts."""

_REFUSED = re.compile(r"GLOBAL (\S+) was not an allowed global")
"""How ``torch.load(weights_only=True)`` names the global it refused."""

_STRINGS = frozenset({"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING",
                      "BINSTRING", "SHORT_BINSTRING"})
"""Opcodes that push a string: ``STACK_GLOBAL`` takes its module and name from the last two."""


def pickle_stream(path: str | os.PathLike[str]) -> bytes:
    """The pickle stream of a checkpoint file: its ``data.pkl`` when it is a zip, else the
    whole file (a plain pickle).

    Raises:
        OSError: the file cannot be read.
        zipfile.BadZipFile: a zip without a pickle member.
    """
    data = Path(path).read_bytes()
    if not zipfile.is_zipfile(io.BytesIO(data)):
        return data
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        member = next((name for name in archive.namelist()
                       if name.rsplit("/", 1)[-1] == PICKLE_MEMBER), None)
        if member is None:
            raise zipfile.BadZipFile(f"no {PICKLE_MEMBER} in the archive")
        return archive.read(member)


def pickled_globals(path: str | os.PathLike[str]) -> list[str] | None:
    """The classes and functions (``module.name``) that the pickle of ``path`` would import,
    in order; None when the stream is not a whole pickle (truncated, corrupt, unreadable).

    Nothing is imported or executed: the opcodes are only listed.
    """
    try:
        stream = pickle_stream(path)
        names: list[str] = []
        strings: list[str] = []
        for opcode, argument, _ in pickletools.genops(stream):
            if opcode.name == "GLOBAL" and isinstance(argument, str):
                names.append(".".join(argument.split(" ", 1)))
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                names.append(f"{strings[-2]}.{strings[-1]}")
            elif opcode.name in _STRINGS and isinstance(argument, str):
                strings.append(argument)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError):
        return None  # pickletools raises ValueError for a stream that ends early
    return names


def refused_object(path: str | os.PathLike[str], error: BaseException) -> str | None:
    """The Python object (``module.name``) that made the safe loader refuse ``path`` with
    ``error``, when the file is a whole pickle that names it; None when the file is damaged
    instead (or names nothing beyond what a checkpoint holds).

    The name torch's message gives is taken only when the intact stream names it too: a
    truncated stream can make torch read a garbled one (``GLOBAL torch.``).
    """
    names = pickled_globals(path)
    if names is None:
        return None
    refused = _REFUSED.search(str(error))
    if refused is not None and refused.group(1) in names:
        return refused.group(1)
    return next((name for name in names if not name.startswith(CHECKPOINT_GLOBALS)), None)

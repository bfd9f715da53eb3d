"""Checkpoints: written atomically, read with ``torch.load(weights_only=True)``.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts (state dicts, the
step counter, the run's resolved config), so loading it never executes pickled code.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch


class CheckpointMismatchError(ValueError):
    """A checkpoint was written by a run with a different cell or config."""


def save_checkpoint(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically: a crash leaves the previous file intact."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(dict(payload), file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | os.PathLike[str],
                    map_location: torch.device | str | None = "cpu") -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint`, refusing pickled code."""
    return torch.load(path, map_location=map_location, weights_only=True)


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def check_compatible(saved: Mapping[str, Any], current: Mapping[str, Any],
                     sections: Iterable[str], source: str = "checkpoint") -> None:
    """Raise :class:`CheckpointMismatchError` if the ``sections`` of two configs differ.

    ``sections`` are top-level keys (``memory``, ``env``, ``agent``, ...) whose values decide
    the shapes and meaning of the saved weights; the message lists every differing key.
    """
    absent = "<absent>"
    differences = []
    for section in sections:
        old, new = (_flatten({section: config[section]}) if section in config else {}
                    for config in (saved, current))
        for key in sorted(set(old) | set(new)):
            if old.get(key, absent) != new.get(key, absent):
                differences.append(f"  {key}: {source} has {old.get(key, absent)!r}, "
                                   f"this run has {new.get(key, absent)!r}")
    if differences:
        hint = ""
        if any(f"{source} has {absent!r}" in line for line in differences):
            hint = (f"\nKeys absent from the {source} did not exist when it was written (an "
                    "older rlmem): evaluate it as it is, or start afresh with resume=false.")
        raise CheckpointMismatchError(
            f"the {source} was written with a different config:\n" + "\n".join(differences)
            + hint)

"""Whose a run directory is: rlmem writes only into a folder it made, or one it is told to take.

A run directory holds a marker file, :data:`MARKER`, from the moment rlmem creates it. Before a
run writes anything, :func:`claim_run_dir` checks the path (not a file, no symlink loop, no name
too long for the file system, a parent it can create into), and then that the folder is rlmem's:
absent or empty (it is created and marked), marked, or a run of an rlmem that predates the
marker (:func:`is_unmarked_run`). Any other non-empty folder is refused unless the user passes
``force=true``, so that ``run_dir=$HOME`` or a typo never overwrites a user's ``config.yaml``.
A folder whose entries are symlinks is refused whatever the force: a write through a planted
link could reach any file.

A run started afresh (``resume=false``) in a directory that holds an earlier run does not delete
it: :func:`move_aside` moves the earlier run's files into ``previous/<UTC time>/`` inside the
same directory, after everything has been checked.
"""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from yaml import YAMLError

from rlmem.runs.errors import RunDirectoryError
from rlmem.runs.files import write_json
from rlmem.runs.lock import LOCK_NAME

MARKER = ".rlmem-run"
"""The file that makes a folder an rlmem run directory (JSON: the rlmem version and the time
the directory was made)."""

PREVIOUS = "previous"
"""Where ``resume=false`` moves an earlier run's files: ``previous/<UTC time>/``."""

FORCE_KEY = "force"
"""The opt-in to take a non-empty folder that is not an rlmem run, as the CLIs spell it."""

_KEPT = frozenset({MARKER, LOCK_NAME, PREVIOUS})
"""Entries that stay in place when an earlier run is moved aside."""


def _invalid_path(run_dir: Path) -> str | None:
    """Why ``run_dir`` can never be a run directory, or None."""
    try:
        resolved = run_dir.resolve()
    except (RuntimeError, OSError) as error:  # a symlink loop: RuntimeError before 3.13
        return f"the path cannot be resolved ({error}); is a symlink in it pointing to itself?"
    limit = 255
    with_limit = next((part for part in resolved.parts if len(os.fsencode(part)) > limit), None)
    if with_limit is not None:
        return (f"the name {with_limit[:40]!r}... is {len(os.fsencode(with_limit))} bytes long, "
                f"more than the {limit} a file name may have")
    for ancestor in (resolved, *resolved.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                what = "it" if ancestor == resolved else f"{ancestor}, a folder above it,"
                return f"{what} is a file, not a folder"
            break
    return None


def is_unmarked_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a run of an rlmem that wrote no :data:`MARKER`: a
    ``config.yaml`` that records a memory cell and a seed, beside the run lock file or a
    checkpoint, as every such run had from its first step (a copied run may lack the lock)."""
    config = run_dir / "config.yaml"
    beside = [run_dir / LOCK_NAME, run_dir / "checkpoint.pt"]
    if not config.is_file() or not any(path.is_file() for path in beside):
        return False
    try:
        recorded: Any = OmegaConf.to_container(OmegaConf.load(config), resolve=False)
    except (OSError, YAMLError, OmegaConfBaseException, UnicodeDecodeError):
        return False
    return (isinstance(recorded, dict) and isinstance(recorded.get("memory"), dict)
            and "name" in recorded["memory"] and "seed" in recorded)


def _symlinks(run_dir: Path) -> list[Path]:
    """The symlinks among ``run_dir``'s entries and those of its subfolders (a run writes into
    ``eval/`` and ``tb/``)."""
    links = []
    for entry in run_dir.iterdir():
        if entry.is_symlink():
            links.append(entry)
        elif entry.is_dir() and entry.name != PREVIOUS:
            links.extend(child for child in entry.iterdir() if child.is_symlink())
    return links


def refuse_symlinks(run_dir: Path) -> None:
    """Refuse a run directory that holds symlinks, where rlmem would write.

    Raises:
        RunDirectoryError: naming the links.
    """
    links = _symlinks(run_dir)
    if links:
        shown = ", ".join(f"{link.relative_to(run_dir)} -> {os.readlink(link)}"
                          for link in links[:5])
        raise RunDirectoryError(
            f"run_dir={run_dir} holds symlinks ({shown}). rlmem writes only regular files in a "
            "run directory, since a write through a link could reach any file; nothing was "
            "written. Replace the links by the files themselves, or choose another run_dir.")


def claim_run_dir(run_dir: Path, *, force: bool = False) -> None:
    """Make ``run_dir`` a run directory rlmem may write into, or refuse it.

    Call it after the whole config has been checked: it is the first thing that touches the
    disk.

    Raises:
        RunDirectoryError: the path can never be one; it cannot be created; it holds symlinks;
            or it is a non-empty folder that is no rlmem run and ``force`` is off. Nothing was
            written in any of these cases.
    """
    reason = _invalid_path(run_dir)
    if reason is not None:
        raise RunDirectoryError(
            f"run_dir={run_dir} cannot be a run directory: {reason}. Nothing was written; "
            "choose another run_dir.")
    if not run_dir.exists():
        try:
            # The resolved path: mkdir of a/missing/.. would create a/missing first.
            run_dir.resolve().mkdir(parents=True)
        except FileExistsError:
            pass  # another process claiming it made it this instant: judged as it is, below
        except OSError as error:
            raise RunDirectoryError(
                f"cannot create run_dir={run_dir}: {error.strerror or error} "
                f"({errno.errorcode.get(error.errno or 0, 'error')}). Nothing was written; "
                "choose a run_dir in a folder you can write to.") from error
        else:
            _mark(run_dir)
            return
    refuse_symlinks(run_dir)
    if (run_dir / MARKER).is_file():
        return
    entries = _entries_but_partial_markers(run_dir)
    if entries and not force and not is_unmarked_run(run_dir):
        shown = ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "")
        raise RunDirectoryError(
            f"run_dir={run_dir} is a folder that rlmem did not make (it holds {shown}), and a "
            "run would write config.yaml, progress.csv, checkpoint.pt and more into it. Nothing "
            "was written. Choose a new or empty run_dir, or pass force=true to make this folder "
            "a run directory (its own files stay, but files of those names are replaced).")
    _mark(run_dir)


def _entries_but_partial_markers(run_dir: Path) -> list[str]:
    """The names in ``run_dir`` but rlmem's own unfinished writes of its :data:`MARKER` (the
    temporary file of :func:`~rlmem.runs.files.write_atomic`): another process claiming the
    folder this instant, or one killed while it did, leaves nothing of the user's."""
    partial = f".{MARKER}."
    return sorted(entry.name for entry in run_dir.iterdir()
                  if not (entry.name.startswith(partial) and entry.name.endswith(".tmp")))


def made_by(run_dir: Path) -> str | None:
    """The rlmem version that made ``run_dir`` (its :data:`MARKER`), or None when unknown."""
    try:
        recorded = json.loads((run_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    version = recorded.get("rlmem") if isinstance(recorded, dict) else None
    return version if isinstance(version, str) else None


def _mark(run_dir: Path) -> None:
    from rlmem import __version__

    try:
        write_json(run_dir / MARKER, {"rlmem": __version__,
                                      "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                               time.gmtime())})
    except OSError as error:
        raise RunDirectoryError(
            f"cannot write into run_dir={run_dir}: {error}. Nothing was written; choose a "
            "writable run_dir.") from error


def move_aside(run_dir: Path) -> Path | None:
    """Move the earlier run in ``run_dir`` (every entry but the marker, the lock and earlier
    ``previous/`` runs) into ``previous/<UTC time>/``; return that folder, or None when there
    was nothing to move.

    Raises:
        RunDirectoryError: an entry could not be moved; those already moved are in the
            returned folder, named in the message.
    """
    entries = [entry for entry in sorted(run_dir.iterdir()) if entry.name not in _KEPT]
    if not entries:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target = run_dir / PREVIOUS / stamp
    suffix = 1
    while target.exists():
        suffix += 1
        target = run_dir / PREVIOUS / f"{stamp}-{suffix}"
    try:
        target.mkdir(parents=True)
        for entry in entries:
            os.rename(entry, target / entry.name)
    except OSError as error:
        raise RunDirectoryError(
            f"resume=false: could not move the earlier run in {run_dir} aside into {target}: "
            f"{error}. Nothing was deleted; what was moved is in {target}. Free the folder by "
            "hand or choose another run_dir.") from error
    return target


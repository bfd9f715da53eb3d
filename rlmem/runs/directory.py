"""Whose a run directory is: rlmem writes only into a folder it made, or one it is told to take.

A run directory holds a marker file, :data:`MARKER`, from the moment rlmem creates it. Before a
run writes anything, :func:`claim_run_dir` checks the path (not a file, no symlink loop, no name
or path too long for the file system, no ``~`` a shell left unexpanded, a parent it can create
into: :func:`refuse_invalid_path`), and then that the folder is rlmem's:
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
from rlmem.runs.files import is_temporary_of, write_json
from rlmem.runs.lock import LOCK_NAME, lock_holder

MARKER = ".rlmem-run"
"""The file that makes a folder an rlmem run directory (JSON: the rlmem version and the time
the directory was made)."""

PREVIOUS = "previous"
"""Where ``resume=false`` moves an earlier run's files: ``previous/<UTC time>/``."""

FORCE_KEY = "force"
"""The opt-in to take a non-empty folder that is not an rlmem run, as the CLIs spell it."""

_KEPT = frozenset({MARKER, LOCK_NAME, PREVIOUS})
"""Entries that stay in place when an earlier run is moved aside."""


NAME_MAX = 255
"""The most bytes a file name may have (every file system rlmem runs on)."""


def _path_max(path: Path) -> int:
    """The most bytes a path may have where ``path`` (or its nearest existing folder) is."""
    for ancestor in (path, *path.parents):
        try:
            return os.pathconf(ancestor, "PC_PATH_MAX")
        except (OSError, ValueError):
            continue  # absent, or itself too long to look at
    return 4096  # Linux's PATH_MAX


def _invalid_path(run_dir: Path) -> str | None:
    """Why ``run_dir`` can never be a run directory, or None."""
    if run_dir.parts and run_dir.parts[0].startswith("~"):
        return (f"it begins with {run_dir.parts[0]!r}, which only a shell expands, and not "
                f"inside quotes: the run would go to a folder named {run_dir.parts[0]!r} in "
                f"{Path.cwd()}. Write the home folder out ($HOME unquoted, or the full path), "
                f"or ./{run_dir} for a folder of that name here")
    try:
        resolved = run_dir.resolve()
    except (RuntimeError, OSError) as error:  # a symlink loop: RuntimeError before 3.13
        return f"the path cannot be resolved ({error}); is a symlink in it pointing to itself?"
    with_limit = next((part for part in resolved.parts if len(os.fsencode(part)) > NAME_MAX),
                      None)
    if with_limit is not None:
        return (f"the name {with_limit[:40]!r}... is {len(os.fsencode(with_limit))} bytes long, "
                f"more than the {NAME_MAX} a file name may have")
    # The longest path a run writes: <run_dir>/.checkpoint.pt.<8 characters>.tmp.
    longest = len(os.fsencode(resolved)) + len("/.checkpoint.pt.12345678.tmp")
    if longest >= (limit := _path_max(resolved)):
        return (f"the path is {len(os.fsencode(resolved))} bytes long, and the files of a run "
                f"in it would pass the {limit} bytes a path may have here")
    try:
        for ancestor in (resolved, *resolved.parents):
            if ancestor.exists():
                if not ancestor.is_dir():
                    what = "it" if ancestor == resolved else f"{ancestor}, a folder above it,"
                    return f"{what} is a file, not a folder"
                break
    except OSError as error:  # a folder above it cannot be searched
        return f"it cannot be looked at ({error.strerror or error})"
    return None


def refuse_invalid_path(run_dir: Path, key: str = "run_dir") -> None:
    """Refuse a path that can never be a run directory (see :func:`claim_run_dir`), before
    anything looks into it: a name or a path too long for the file system, a ``~`` that no shell
    expanded, a file where a folder should be.

    Raises:
        RunDirectoryError: naming why; ``key`` is the command-line key that gave the path.
    """
    reason = _invalid_path(run_dir)
    if reason is not None:
        raise RunDirectoryError(
            f"{key}={run_dir} cannot be a run directory: {reason}. Nothing was written; "
            f"choose another {key}.")


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


def refuse_symlinks(run_dir: Path, key: str = "run_dir",
                    elsewhere: str | None = "choose another run_dir") -> None:
    """Refuse a run directory that holds symlinks, where rlmem would write.

    Args:
        run_dir: the run directory.
        key: the command-line key that named it, for the message.
        elsewhere: the user's other choice, ending the message; None where there is none.

    Raises:
        RunDirectoryError: naming the links.
    """
    links = _symlinks(run_dir)
    if links:
        shown = ", ".join(f"{link.relative_to(run_dir)} -> {os.readlink(link)}"
                          for link in links[:5])
        raise RunDirectoryError(
            f"{key}={run_dir} holds symlinks ({shown}). rlmem writes only regular files in a "
            "run directory, since a write through a link could reach any file; nothing was "
            "written. Replace the links by the files themselves"
            f"{f', or {elsewhere}' if elsewhere else ''}.")


def run_identity(run_dir: Path) -> tuple[int, int] | None:
    """Which run ``run_dir`` holds: its :data:`MARKER`'s file (device and inode), which
    ``resume=false`` replaces as it moves the earlier run aside (:func:`move_aside`); None for
    a folder without one. A reader that must write back into the run it read (an evaluation)
    compares it before it writes."""
    try:
        found = os.stat(run_dir / MARKER, follow_symlinks=False)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def claim_run_dir(run_dir: Path, *, force: bool = False) -> None:
    """Make ``run_dir`` a run directory rlmem may write into, or refuse it.

    Call it after the whole config has been checked: it is the first thing that touches the
    disk.

    Raises:
        RunDirectoryError: the path can never be one; it cannot be created; it holds symlinks;
            or it is a non-empty folder that is no rlmem run and ``force`` is off. Nothing was
            written in any of these cases.
    """
    refuse_invalid_path(run_dir)
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


def remove_temporaries(run_dir: Path, names: tuple[str, ...]) -> list[Path]:
    """Remove the temporary files that a killed write of one of ``names`` left in
    ``run_dir`` (:func:`~rlmem.runs.files.is_temporary_of`); return them. Call it holding the
    run's lock: no live writer of the run is then making one."""
    stale = [entry for entry in run_dir.iterdir()
             if any(is_temporary_of(entry, name) for name in names) and entry.is_file()
             and not entry.is_symlink()]
    for entry in stale:
        entry.unlink(missing_ok=True)
    return stale


def held_locks_below(run_dir: Path) -> list[tuple[Path, str]]:
    """The lock files under ``run_dir`` (but its own ``.lock`` and ``previous/``) that a live
    process holds, with its PID: a run nested in a subfolder, or an evaluation writing its
    report into ``eval/``. Links are not followed."""
    held = []
    for folder, subfolders, files in os.walk(run_dir):
        if Path(folder) == run_dir:
            subfolders[:] = [name for name in subfolders if name != PREVIOUS]
        for name in files:
            path = Path(folder) / name
            if name.startswith(".") and name.endswith(".lock") and path != run_dir / LOCK_NAME:
                holder = lock_holder(path.parent, name)
                if holder is not None:
                    held.append((path, holder))
    return held


def move_aside(run_dir: Path) -> Path | None:
    """Move the earlier run in ``run_dir`` (every entry but the marker, the lock and earlier
    ``previous/`` runs) into ``previous/<UTC time>/``; return that folder, or None when there
    was nothing to move.

    Raises:
        RunDirectoryError: a live process holds a lock below ``run_dir`` (a run nested in it,
            an evaluation of the earlier run), so that nothing is pulled from under it and
            nothing was moved; or an entry could not be moved, and those already moved are in
            the returned folder, named in the message.
    """
    entries = [entry for entry in sorted(run_dir.iterdir()) if entry.name not in _KEPT]
    if not entries:
        return None
    held = held_locks_below(run_dir)
    if held:
        shown = ", ".join(f"{path.relative_to(run_dir)} (PID {pid})" for path, pid in held[:3])
        raise RunDirectoryError(
            f"resume=false would move the earlier run in {run_dir} into {PREVIOUS}/, but a live "
            f"process works below it: {shown} is held (a run in a subfolder, or an evaluation "
            "writing its report). Moving its files would pull them from under it. Nothing was "
            "moved or written. Wait for it to finish or stop it, or choose another run_dir.")
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
    _mark(run_dir)  # a new run: a reader of the earlier one sees it (run_identity)
    return target


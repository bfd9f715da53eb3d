"""The run checkpoint: one typed payload, written atomically, read with ``weights_only=True``.

Every trainer (our PPO, ``agent=sb3``, the supervised tasks) saves a :class:`Checkpoint`, and
``rlmem.evaluate`` reads the same type. On disk it is a plain dict of tensors, numbers,
strings, lists and dicts, so loading it never executes pickled code. A checkpoint is only
written when every tensor in it is finite, so the file on disk can always act.

A checkpoint records its :data:`FORMAT`. One of an older format (rlmem 0.1's untyped dict, or a
config that lacks keys added since) is never read as if it were current: :func:`load_checkpoint`
refuses it, naming ``python -m rlmem.migrate`` (:mod:`rlmem.migrate`), which rewrites it once.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import pickle
import shlex
import shutil
import struct
import zipfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rlmem.runs.errors import CheckpointWriteError, NonFiniteLossError, UnreadableCheckpointError
from rlmem.runs.files import temporary_file
from rlmem.runs.pickles import refused_object

FORMAT = 5
"""Version of the checkpoint: its layout and what its config records. 1: rlmem 0.1's untyped
dict (no ``format`` key); 2: the typed :class:`Checkpoint`, whose config may lack keys added
later; 3: every key of the config written explicitly (rlmem 0.2); 4: our PPO's presets
(``agent.preset``, ``shared_memory``, ``reward_scale``); 5: the run's arithmetic
(``flush_denormal``). :mod:`rlmem.migrate` brings an older one to this format."""

MIGRATE_COMMAND = "python -m rlmem.migrate"
"""The command that brings a run of an older format to :data:`FORMAT`."""


class CheckpointMismatchError(ValueError):
    """A checkpoint was written by a run with a different cell or config."""


class OlderCheckpointError(UnreadableCheckpointError):
    """A checkpoint of an older :data:`FORMAT`: ``python -m rlmem.migrate`` rewrites it."""


@dataclass
class Checkpoint:
    """Everything a run needs to continue, or to be evaluated.

    Attributes:
        config: the run's resolved config (what ``config.yaml`` shows).
        progress: counters: ``frames`` and ``updates`` (RL), ``iteration`` (supervised), and
            ``elapsed_s`` / ``cpu_s``.
        states: state dicts by name: ``model`` (our PPO, supervised), ``policy`` (sb3),
            ``optimizer``.
        rng: generator states by name: ``torch`` (the global CPU generator), ``data``.
        extras: what a trainer carries besides: ``recent_returns``, ``observation``.
        format: :data:`FORMAT`.
    """

    config: dict[str, Any]
    progress: dict[str, float] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    rng: dict[str, Tensor] = field(default_factory=dict)
    extras: dict[str, Any] = field(default_factory=dict)
    format: int = FORMAT

    def count(self, key: str) -> int:
        """An integer counter of :attr:`progress` (0 when absent)."""
        return int(self.progress.get(key, 0))


# --- finiteness --------------------------------------------------------------------------------

def _tensors(value: Any, path: str) -> Iterator[tuple[str, Tensor]]:
    if isinstance(value, Tensor):
        yield path, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _tensors(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{path}[{index}]")


def first_non_finite(states: Mapping[str, Any]) -> str | None:
    """The name of the first floating tensor in ``states`` holding a NaN or an infinity."""
    for name, tensor in _tensors(states, ""):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            return name
    return None


# --- saving and loading ------------------------------------------------------------------------

def save_checkpoint(path: str | os.PathLike[str], checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` to ``path`` atomically: a failure leaves the previous file intact.

    Raises:
        NonFiniteLossError: a weight or optimizer state is NaN or infinite; nothing is written,
            so the previous checkpoint stays the last good one.
        CheckpointWriteError: the file could not be written (no space, read-only, ...).
    """
    path = Path(path)
    bad = first_non_finite(checkpoint.states)
    if bad is not None:
        raise NonFiniteLossError(
            f"the run diverged: {bad} is no longer finite, so this state is not saved. "
            f"{on_disk(path)} Lower the learning rate (or the step sizes), or restart with "
            "resume=false.")
    handle: int | None = None
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, tmp = temporary_file(path)
        with os.fdopen(handle, "wb") as file:
            handle = None
            # Its fields as they are: dataclasses.asdict would deep-copy every tensor first.
            torch.save({item.name: getattr(checkpoint, item.name)
                        for item in dataclasses.fields(checkpoint)}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
        tmp = None
    except (OSError, RuntimeError) as error:
        raise CheckpointWriteError(_write_failure(path, error)) from error
    finally:
        if handle is not None:
            os.close(handle)
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def on_disk(path: Path) -> str:
    """What a failed step leaves on disk, in one sentence."""
    return (f"The last good checkpoint, {path}, is intact." if path.exists()
            else f"No checkpoint was written yet ({path} does not exist).")


def _write_failure(path: Path, error: BaseException) -> str:
    code = getattr(error, "errno", None)
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = None
    if code == errno.ENOSPC or (code is None and free is not None and free < 64 << 20):
        reason = f"no space left on the device ({free} bytes free)"
    elif code in (errno.EROFS, errno.EACCES, errno.EPERM):
        reason = f"the run directory is not writable ({error})"
    else:
        reason = str(error)
    return (f"could not write the checkpoint {path}: {reason}. {on_disk(path)} Free some "
            "space or choose another run_dir, then run the same command again to resume.")


AFRESH = ("It was not loaded, and no file of the run was changed: move it away to "
          "start afresh (or pass resume=false).")
"""What a reader of an unreadable checkpoint can do, ending its message."""


def load_payload(path: str | os.PathLike[str],
                 map_location: torch.device | str | None = "cpu", *,
                 remedy: str = AFRESH) -> dict[str, Any]:
    """The raw dict a checkpoint file holds, of any format, read with ``weights_only=True``: a
    dict with a ``config`` dict. :func:`load_checkpoint` reads a current one; only
    :mod:`rlmem.migrate` reads older ones through this.

    Args:
        path: the checkpoint file.
        map_location: where its tensors are loaded.
        remedy: what the user can do, ending the message of a refusal.

    Raises:
        UnreadableCheckpointError: the file is truncated, corrupt, not a checkpoint, or holds
            pickled Python objects (which no rlmem checkpoint contains; it is never loaded).
    """
    path = Path(path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        refused = refused_object(path, error)
        if refused is None:  # torch's message would advise loading it unsafely: not shown
            raise UnreadableCheckpointError(
                f"{path} is unreadable: its pickle stream is truncated or corrupt. "
                f"{remedy}") from None
        raise UnreadableCheckpointError(
            f"{path} holds pickled Python objects ({refused}), which no rlmem checkpoint "
            "contains: loading them could run code hidden in the file, so it was refused. It "
            "may be malicious; do not load it by any other means unless you know who made "
            f"it and why. {remedy}") from None
    # struct.error: a pickle cut inside a number (torch 2.11); IndexError: one cut just after
    # the opcode of a one-byte number (torch's weights_only unpickler indexes the empty read).
    except (RuntimeError, EOFError, OSError, zipfile.BadZipFile, ValueError, KeyError,
            IndexError, struct.error) as error:
        reason = str(error).splitlines()[0] if str(error) else "the file ends early"
        raise UnreadableCheckpointError(
            f"{path} is unreadable (truncated or corrupt? {type(error).__name__}: {reason}). "
            f"{remedy}") from error
    if not isinstance(payload, dict) or not isinstance(payload.get("config"), dict):
        raise UnreadableCheckpointError(
            f"{path} is not an rlmem checkpoint (it holds no config). {remedy}")
    return payload


def payload_format(path: Path, payload: Mapping[str, Any], remedy: str = AFRESH) -> int:
    """The :data:`FORMAT` of a checkpoint's raw ``payload``: 1 where it records none (rlmem
    0.1's untyped dict).

    Raises:
        UnreadableCheckpointError: its ``format`` is no positive integer.
    """
    found = payload.get("format", 1)
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise UnreadableCheckpointError(
            f"{path} is not a checkpoint rlmem wrote: its format is {found!r}, not a version "
            f"number. It was altered or written by another program. {remedy}")
    return found


def checkpoint_from_payload(path: Path, payload: Mapping[str, Any],
                            remedy: str = AFRESH) -> Checkpoint:
    """A raw ``payload`` of the current :data:`FORMAT` as a :class:`Checkpoint`, once its keys
    are those of the type.

    Raises:
        UnreadableCheckpointError: it has keys rlmem never writes, or one that is no dict.
    """
    fields = [item.name for item in dataclasses.fields(Checkpoint)]
    unknown = sorted(map(str, set(payload) - set(fields)))
    wrong = sorted(key for key in set(payload) & set(fields) - {"format"}
                   if not isinstance(payload[key], dict))
    if unknown or wrong:
        found = (f"keys rlmem never writes ({', '.join(unknown)})" if unknown else
                 f"{', '.join(wrong)} that {'is' if len(wrong) == 1 else 'are'} not a dict")
        raise UnreadableCheckpointError(
            f"{path} is not a checkpoint rlmem wrote: it has {found}; a checkpoint of format "
            f"{FORMAT} holds {', '.join(fields)}. It was altered or written by another "
            f"program. {remedy}")
    return Checkpoint(**payload)


def load_checkpoint(path: str | os.PathLike[str],
                    map_location: torch.device | str | None = "cpu", *,
                    remedy: str = AFRESH) -> Checkpoint:
    """Read a checkpoint of the current :data:`FORMAT` written by :func:`save_checkpoint`,
    refusing pickled code, and one whose states hold a NaN or an infinity (which
    :func:`save_checkpoint` never writes: it could not act, and a run resumed from it would
    diverge at once). ``remedy`` ends the message of a refusal (what the user can do).

    Raises:
        OlderCheckpointError: it is of an older format (rlmem 0.1's, or a config without the
            keys added since): ``python -m rlmem.migrate <run_dir>`` rewrites it once. It is
            never read as if it were current.
        UnreadableCheckpointError: the file is truncated, corrupt, not a checkpoint, holds
            pickled Python objects (which no rlmem checkpoint contains; it is never loaded),
            holds non-finite states, or was written by a newer rlmem.
    """
    path = Path(path)
    payload = load_payload(path, map_location, remedy=remedy)
    found = payload_format(path, payload, remedy)
    if found < FORMAT:
        raise OlderCheckpointError(
            f"{path} was written by an older rlmem (format {found}); run {MIGRATE_COMMAND} "
            f"{shlex.quote(str(path.parent))} once, then run this command again. The migration "
            "writes every key this rlmem reads (format "
            f"{FORMAT}) into the checkpoint and config.yaml, at the values the run had. It was "
            "not loaded, and no file of the run was changed.")
    if found > FORMAT:
        raise UnreadableCheckpointError(
            f"{path} was written by a newer rlmem (format {found}; this rlmem reads format "
            f"{FORMAT}). It was not loaded, and no file of the run was changed: "
            "upgrade rlmem to read it.")
    checkpoint = checkpoint_from_payload(path, payload, remedy)
    bad = first_non_finite(checkpoint.states)
    if bad is not None:
        raise UnreadableCheckpointError(
            f"{path} holds {bad}, which is not finite (NaN or infinite): no checkpoint rlmem "
            "writes holds one, so it cannot act and a run resumed from it would diverge at "
            f"once. It was altered, or written by another program. {remedy}")
    return checkpoint


# --- resuming ------------------------------------------------------------------------------

def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def _version() -> str:
    from rlmem import __version__

    return __version__


def check_compatible(saved: Mapping[str, Any], current: Mapping[str, Any],
                     sections: Iterable[str], source: str = "checkpoint",
                     same: Mapping[str, Any] | None = None, *, run_dir: Path | None = None,
                     written_by: str | None = None) -> None:
    """Raise :class:`CheckpointMismatchError` if the ``sections`` of two configs differ.

    ``sections`` are top-level keys (``memory``, ``env``, ``agent``, ...) whose values decide
    the shapes and meaning of the saved weights; the message lists every differing key.
    ``same[key]`` maps a value to a canonical form, for keys with several spellings of one
    thing (an env's short name and its gymnasium id). A checkpoint of the current format
    records every key (:mod:`rlmem.migrate` brings an older one to it), so a key the saved
    config lacks is not known, never assumed.

    The advice says only what can be true: a section whose ``name`` differs (``memory.name``:
    another cell, ``agent.name``: another agent) holds another thing, whose options are not
    compared one by one; an older rlmem is named only where ``written_by`` (the rlmem version
    that made the run directory) is another version than this one. Starting afresh is offered
    as what it is: ``resume=false`` moves the earlier run in ``run_dir`` aside, or another
    ``run_dir`` keeps both.
    """
    found = _compare(saved, current, sections, source, same or {})
    if not found.differences:
        return
    raise CheckpointMismatchError(
        f"the {source} was written with a different config:\n" + "\n".join(found.differences)
        + f"\n{_advice(found, source, run_dir, written_by)} Nothing was changed: the {source} "
        "is as it was.")


@dataclass
class _Differences:
    """What :func:`_compare` found between a saved config and the current one."""

    differences: list[str] = field(default_factory=list)
    """One line per differing key, in the order of the sections and, in each, of the keys."""
    resumes: dict[str, Any] = field(default_factory=dict)
    """The saved value of every differing key it records: the overrides that resume it."""
    unrecorded: list[str] = field(default_factory=list)
    """Keys the saved config lacks."""
    renamed: list[str] = field(default_factory=list)
    """Sections of another kind, as overrides: ``memory=gru``."""


def _compare(saved: Mapping[str, Any], current: Mapping[str, Any], sections: Iterable[str],
             source: str, canonical: Mapping[str, Any]) -> _Differences:
    """Every key of ``sections`` whose value differs between ``saved`` and ``current``.

    Values are compared in their ``canonical`` form where one is given. In a section of
    another kind (its ``name`` differs), a key only one side has is an option of that kind
    only, and not a difference.
    """
    absent = object()  # a key one config does not record (None is a value)
    found = _Differences()
    for section in sections:
        old, new = (_flatten({section: config[section]}) if section in config else {}
                    for config in (saved, current))
        name = f"{section}.name"
        other_kind = name in old and name in new and old[name] != new[name]
        if other_kind:
            found.renamed.append(f"{section}={old[name]}")
        for key in sorted(set(old) | set(new)):
            a, b = old.get(key, absent), new.get(key, absent)
            if other_kind and key != name and (a is absent or b is absent):
                continue  # an option of one kind of cell or agent only
            if key in canonical and a is not absent and b is not absent:
                a_same, b_same = canonical[key](a), canonical[key](b)
            else:
                a_same, b_same = a, b
            if a_same == b_same:
                continue
            if a is absent:
                found.unrecorded.append(key)
                found.differences.append(f"  {key}: the {source} does not record it, this run "
                                         f"has {b!r}")
                continue
            found.resumes[key] = a
            if b is absent:
                found.differences.append(f"  {key}: {source} has {a!r}, this run does not set it")
            else:
                found.differences.append(f"  {key}: {source} has {a!r}, this run has {b!r}")
    return found


def _advice(found: _Differences, source: str, run_dir: Path | None,
            written_by: str | None) -> str:
    """What to do about ``found``, saying only what can be true (see :func:`check_compatible`).

    Another kind of model is named first, as it makes the other differences moot; then keys
    the saved config lacks, whose meaning is unknown; otherwise the overrides that resume it.
    """
    folder = "the run directory" if run_dir is None else str(run_dir)
    afresh = (f"start afresh with resume=false, which moves the earlier run (its checkpoint, "
              f"config.yaml, progress.csv, tb/ and eval/) into {folder}/previous/<time>/ and "
              "deletes nothing; or keep both runs by giving this one another run_dir=")
    if found.renamed:
        kinds = " ".join(found.renamed)
        return (f"The {source} holds another kind of model ({kinds}): resume it with "
                f"{kinds}, or {afresh}.")
    if found.unrecorded:
        unrecorded = found.unrecorded
        when = (f"by rlmem {written_by}, older than this rlmem ({_version()}): "
                f"{MIGRATE_COMMAND} records the values it had" if written_by is not None
                and written_by != _version() else
                "the key is newer than the checkpoint, or the file was altered")
        return (f"The {source} does not record {', '.join(unrecorded)}, and what "
                f"{'it' if len(unrecorded) == 1 else 'they'} meant when it was written is not "
                f"known ({when}): evaluate it as it is, or {afresh}.")
    scalar = all(value is None or isinstance(value, (str, int, float))
                 for value in found.resumes.values())
    values = (" ".join(  # as overrides: null, true, false
        f"{key}={json.dumps(value) if value is None or isinstance(value, bool) else value}"
        for key, value in found.resumes.items()) if scalar else f"the {source}'s values above")
    return f"Resume it with {values}, or {afresh}."

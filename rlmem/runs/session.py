"""The run skeleton every trainer shares: :func:`open_run` from prologue to exit.

A trainer writes only its own loop::

    with open_run(run_dir, config, RULES, program="rlmem.train") as run:
        start = run.checkpoint            # None, or the Checkpoint to resume from
        while not done and not run.stop_requested:
            ...one update...
            run.save(Checkpoint(...))     # atomic, and only when every tensor is finite

:func:`open_run` claims and locks the run directory, picks the device, threads and arithmetic,
loads a compatible checkpoint (or moves an earlier run aside when ``resume`` is off), writes
``config.yaml`` when there is work to do, and turns the first Ctrl-C into a stop at the next
checkpoint, with the command that resumes the run. A run that resumes says so, and at which
step.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from rlmem.runs.allocator import keep_freed_memory
from rlmem.runs.arithmetic import FLUSH_KEY, subnormal_floats
from rlmem.runs.checkpoint import (
    Checkpoint,
    CheckpointMismatchError,
    check_compatible,
    load_checkpoint,
    save_checkpoint,
)
from rlmem.runs.device import resolve_device
from rlmem.runs.directory import (
    FORCE_KEY,
    PREVIOUS,
    claim_run_dir,
    made_by,
    move_aside,
    refuse_invalid_path,
    remove_temporaries,
)
from rlmem.runs.errors import RunDirectoryError, RunInterrupted, UnreadableCheckpointError
from rlmem.runs.files import write_atomic
from rlmem.runs.interrupt import GracefulInterrupt
from rlmem.runs.lock import RunLock
from rlmem.runs.multirun import job_of_interrupted_sweep

CHECKPOINT_NAME = "checkpoint.pt"
"""The file name of a run's (single, atomically replaced) checkpoint."""

WRITTEN = (CHECKPOINT_NAME, "config.yaml", "progress.csv")
"""The files of a run written through a temporary file, whose temporaries a killed run may
leave: the next run of the directory removes them."""


@dataclass(frozen=True)
class ResumeRules:
    """What a checkpoint must share with the config that resumes it."""

    sections: tuple[str, ...]
    """Top-level config keys that must match (they decide the weights' shapes and meaning)."""
    counter: str
    """The progress counter (``frames``, ``iteration``)."""
    budget: str
    """The config key the counter runs up to (``frames``, ``iterations``); it may grow."""
    same: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    """Canonical forms of keys with several spellings (an env's short name and its id)."""
    recorded: Callable[[Mapping[str, Any]], Mapping[str, Any]] = dict
    """A checkpoint's config as this rlmem would record it (an older run may have left a value
    undecided that is decided today); compared instead of the checkpoint's own."""
    refuse_code: Callable[[Mapping[str, Any], Mapping[str, Any], str], None] = (
        lambda saved, current, source: None)
    """Called with the checkpoint's config, this run's and the checkpoint's path before the
    checkpoint's config is interpreted: raises where it names code this run may not import
    (:func:`rlmem.envs.refuse_untrusted_code`). A run whose config names no code (a
    supervised task) needs none."""


@dataclass
class RunSession:
    """A run in its directory, as :func:`open_run` prepared it."""

    run_dir: Path
    device: torch.device
    checkpoint: Checkpoint | None
    """The checkpoint resumed from, or None for a fresh run."""
    interrupt: GracefulInterrupt
    finished: bool = False
    """The checkpoint has already reached the budget: there is nothing to train, and nothing
    in the run directory should change."""

    @property
    def checkpoint_path(self) -> Path:
        return self.run_dir / CHECKPOINT_NAME

    @property
    def stop_requested(self) -> bool:
        """Ctrl-C was pressed: stop after the next checkpoint."""
        return self.interrupt.requested

    def save(self, checkpoint: Checkpoint) -> None:
        """Write the checkpoint atomically; refuse a non-finite one (see
        :func:`~rlmem.runs.checkpoint.save_checkpoint`)."""
        save_checkpoint(self.checkpoint_path, checkpoint)


def checkpoint_to_resume(run_dir: Path) -> Path | None:
    """The checkpoint a run in ``run_dir`` would resume: its path where it is a file (not a
    link), None where there is none. For a look before the run is opened (under its lock,
    :func:`open_run` says what is wrong with one that is not a file).

    Raises:
        RunDirectoryError: ``run_dir`` can never be a run directory (a name or a path too long
            for the file system, a ``~`` no shell expanded, ...:
            :func:`~rlmem.runs.directory.refuse_invalid_path`).
    """
    refuse_invalid_path(Path(run_dir))
    path = Path(run_dir) / CHECKPOINT_NAME
    return None if path.is_symlink() or not path.is_file() else path


def resolved_config(cfg: DictConfig) -> dict[str, Any]:
    """The composed config ``cfg`` as plain data, as a run records it: interpolations resolved,
    enum members as their names."""
    config = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    assert isinstance(config, dict)  # a DictConfig's container is a dict
    return {str(key): value for key, value in config.items()}


def resume_command(program: str) -> str:
    """The command line that runs this program again with the same arguments."""
    return " ".join(["python", "-m", program, *map(shlex.quote, sys.argv[1:])])


@contextmanager
def open_run(run_dir: Path, config: Mapping[str, Any], rules: ResumeRules, *, program: str
             ) -> Iterator[RunSession]:
    """Prepare ``run_dir`` for a run of ``config`` and hold it until the block ends.

    ``config`` is the resolved config, already checked in full: this is the first step that
    touches the disk. Its ``resume``, ``force``, ``device``, ``torch_threads`` and
    ``flush_denormal`` keys are read here: the block computes with subnormal floats kept or
    flushed to zero as the last says (:func:`~rlmem.runs.arithmetic.subnormal_floats`). The
    process keeps the memory it frees from then on
    (:func:`~rlmem.runs.allocator.keep_freed_memory`). The
    directory is claimed (:func:`~rlmem.runs.directory.claim_run_dir`: created and
    marked, or refused when it is a foreign folder or holds symlinks), then locked; a checkpoint
    there is resumed when it is compatible, and with ``resume=false`` the earlier run is moved
    into ``previous/`` (:func:`~rlmem.runs.directory.move_aside`), never deleted.

    Raises:
        RunLockedError: another process holds ``run_dir``.
        SubnormalFlushError: ``flush_denormal`` cannot be honoured here (before the
            checkpoint is read or config.yaml written).
        RunDirectoryError: ``run_dir`` cannot be created or written, is not rlmem's, or holds
            symlinks.
        UnreadableCheckpointError: the checkpoint there is truncated, corrupt or no file.
        CheckpointMismatchError: the checkpoint there belongs to another config.
        RunInterrupted: Ctrl-C stopped the run at a checkpoint, or the run is a job of a sweep
            that was interrupted (:func:`~rlmem.runs.multirun.job_of_interrupted_sweep`), and is not
            started.
    """
    run_dir = Path(run_dir)
    unstarted = job_of_interrupted_sweep()
    if unstarted is not None:
        print(f"{program}: {unstarted.describe()} not started: its sweep was interrupted",
              file=sys.stderr, flush=True)
        raise RunInterrupted
    device = resolve_device(str(config.get("device", "auto")))  # before the folder is made
    claim_run_dir(run_dir, force=bool(config.get(FORCE_KEY, False)))
    with RunLock(run_dir):
        remove_temporaries(run_dir, WRITTEN)  # of a write a kill cut short
        torch.set_num_threads(int(config.get("torch_threads", 1)))
        keep_freed_memory()  # no page faults on torch's fresh buffers; no arithmetic changes
        with subnormal_floats(bool(config.get(FLUSH_KEY, False))):
            path = run_dir / CHECKPOINT_NAME
            checkpoint = _checkpoint_or_fresh_start(run_dir, config, rules, device)
            done = (checkpoint is not None
                    and checkpoint.count(rules.counter) >= config[rules.budget])
            _say_where_it_starts(run_dir, config, rules, checkpoint, done=done)
            with _config_recorded(run_dir, config, write=not done), \
                    GracefulInterrupt() as interrupt:
                yield RunSession(run_dir, device, checkpoint, interrupt, finished=done)
            if interrupt.requested:
                print(f"{program}: interrupted; {path} holds the last finished step. Resume "
                      f"with: {resume_command(program)}", file=sys.stderr, flush=True)
                raise RunInterrupted


def _checkpoint_or_fresh_start(run_dir: Path, config: Mapping[str, Any], rules: ResumeRules,
                               device: torch.device) -> Checkpoint | None:
    """The checkpoint ``run_dir`` resumes from, checked against ``config``; or None.

    With ``resume`` on, a checkpoint there is read, its config's code refused where this run may
    not import it, and its config compared with ``config`` (raising before anything is
    written). With ``resume=false`` the earlier run is moved aside, never deleted.
    """
    path = run_dir / CHECKPOINT_NAME
    resume = bool(config.get("resume", True))
    if resume and path.exists():
        if not path.is_file():
            raise UnreadableCheckpointError(
                f"{path} is not a file, so there is no checkpoint to resume. Nothing was "
                "written. Move it away, or pass resume=false, which moves the run's files "
                f"into {run_dir / PREVIOUS} and starts afresh.")
        checkpoint = load_checkpoint(path, map_location=device)
        rules.refuse_code(checkpoint.config, config, str(path))
        check_compatible(rules.recorded(checkpoint.config), config, rules.sections,
                         same=rules.same, run_dir=run_dir, written_by=made_by(run_dir))
        return checkpoint
    if not resume:
        moved = move_aside(run_dir)
        if moved is not None:
            print(f"resume=false: the earlier run in {run_dir} was moved to {moved}; "
                  "delete that folder when you no longer need it.", flush=True)
    return None


def _say_where_it_starts(run_dir: Path, config: Mapping[str, Any], rules: ResumeRules,
                         checkpoint: Checkpoint | None, *, done: bool) -> None:
    """Tell a run that resumes at which step, and one that is ``done`` that it trains nothing
    (a fresh run says nothing here): the user sees which run this command continues."""
    if checkpoint is not None and not done:
        print(f"resuming {run_dir} at {rules.counter} {checkpoint.count(rules.counter)} "
              f"(of {rules.budget}={config[rules.budget]}) from its {CHECKPOINT_NAME}; "
              f"resume=false would instead move this run into {PREVIOUS}/ and start "
              "afresh.", flush=True)
    if done:
        assert checkpoint is not None
        print(f"{run_dir} has already trained {checkpoint.count(rules.counter)} "
              f"{rules.counter} (>= {rules.budget}={config[rules.budget]}): nothing to "
              f"train; its config.yaml is left as it was. Raise {rules.budget}= to train "
              "further.", flush=True)


@contextmanager
def _config_recorded(run_dir: Path, config: Mapping[str, Any], *, write: bool
                     ) -> Iterator[None]:
    """Write ``config`` to ``run_dir``/config.yaml (when ``write``) for the block's run.

    A :class:`CheckpointMismatchError` from the block (the checkpoint's states did not fit,
    raised as the trainer loads them, before any step) means this start never ran, so
    config.yaml goes back to what it said before.
    """
    config_path = run_dir / "config.yaml"
    earlier_config = config_path.read_bytes() if config_path.is_file() else None
    if write:
        try:
            write_atomic(config_path, OmegaConf.to_yaml(dict(config)))
        except OSError as error:
            raise RunDirectoryError(
                f"cannot write into run_dir={run_dir}: {error}. Nothing was trained; "
                "choose a writable run_dir.") from error
    try:
        yield
    except CheckpointMismatchError:
        if write:
            if earlier_config is None:
                config_path.unlink(missing_ok=True)
            else:
                write_atomic(config_path, earlier_config)
        raise

"""Bring runs written by an older rlmem to the current checkpoint format, once.

    python -m rlmem.migrate runs/ppo/MemoryS7/lstm/seed0 [more run directories]

A run's ``checkpoint.pt`` records its :data:`~rlmem.runs.checkpoint.FORMAT`. rlmem reads only
the current one (:func:`rlmem.runs.load_checkpoint` refuses an older one and names this
command), so no reader keeps a branch for the past. This command rewrites an older run, an RL
run of either agent or a supervised run, to the current format: it applies the steps from the
run's format to the current one (:data:`STEPS`), then writes every key of today's config
explicitly (:func:`complete_config`), into the checkpoint and into ``config.yaml`` alike.

It changes a run only safely. It writes only into a run directory (one rlmem marked, or one
of an rlmem that predates the marker), never through a symlink, and while it holds the run's
lock, so no run trains there meanwhile. The checkpoint is read with ``weights_only=True`` and
every file is replaced atomically; the old checkpoint stays beside the new one as
``checkpoint.format<N>.pt`` until the new one has been written and read back, and is removed
then. A run already current is reported as such and left as it is, so running the command
twice changes nothing the second time. Each run gets one line saying what changed, or one
paragraph saying why it was not migrated (the others are migrated all the same).

How a format changes (the rule for whoever changes it next)
-----------------------------------------------------------
Bump :data:`~rlmem.runs.checkpoint.FORMAT` whenever what a checkpoint records changes: a key
added to a config (the run's, an agent's, a task's or a cell's), a weight renamed or added;
and add the step from the old format, a small function, to :data:`STEPS`. For a key whose
default is what runs without it did, the step changes nothing but the format's number: the
completion writes the default. Anything else is migrated *next to the option it concerns*:
the module that defines the option also defines the function that maps an older run's config
(and state dict, as torch's per-module ``_version`` upgrades a module's weights), and the step
only calls it. Never a central table keyed by options: a new option of a cell touches that
cell's file and one step, not ``rlmem.runs``.

The steps so far (:data:`STEPS`); step 2 → 3 replaces, once and whole, the central table of
old values that rlmem 0.1.x's checkpoint module kept and this rule forbids: it is history, and
no later option changes it.

- format 1 → 2: rlmem 0.1's untyped dict, one per trainer, sorted into the typed
  :class:`~rlmem.runs.checkpoint.Checkpoint` (:func:`format_1_to_2`);
- format 2 → 3: what runs did before the options that changed it existed: the raw grid
  floats, torch's own LSTM forget-gate bias, iRNN's Eq. 5 with a learned α (and its weights
  recording that rule), the transfer lengths evaluated at every evaluation, and a ``mission``
  left to be derived (:func:`format_2_to_3`);
- format 3 → 4: our PPO's presets (``agent.preset``, ``shared_memory``, ``reward_scale``):
  a run before them took rl-starter-files' values, its critic reading the actor's memory
  (:func:`format_3_to_4`, which calls :func:`rlmem.agents.ppo.presets.before_presets`);
- format 4 → 5: every run's ``flush_denormal``, whose default (subnormal floats kept) is what
  runs before it did (:func:`format_4_to_5`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from yaml import YAMLError

from rlmem.agents.derived import with_derived_values
from rlmem.agents.ppo.presets import before_presets
from rlmem.agents.registry import AGENTS
from rlmem.cells import cell_config, get_cell_class, hyperparameters, make_cell
from rlmem.cells.irnn import IncrementalRNN, IRNNUpdate
from rlmem.envs import refuse_untrusted_code
from rlmem.envs.backend import GYMNASIUM
from rlmem.runs.checkpoint import (
    FORMAT,
    checkpoint_from_payload,
    load_checkpoint,
    load_payload,
    payload_format,
    save_checkpoint,
)
from rlmem.runs.directory import MARKER, is_unmarked_run, refuse_symlinks
from rlmem.runs.errors import (
    INTERRUPTED,
    USER_ERRORS,
    CheckpointWriteError,
    RunError,
    RunLockedError,
)
from rlmem.runs.files import write_atomic
from rlmem.runs.lock import LOCK_NAME, RunLock
from rlmem.runs.session import CHECKPOINT_NAME
from rlmem.schema.supervised import TASK_SCHEMAS, SupervisedConfig
from rlmem.schema.train import TrainConfig

PROGRAM = "rlmem.migrate"

CONFIG_NAME = "config.yaml"
"""The run's config, as a person reads it; migrated as the checkpoint's is."""

Payload = dict[str, Any]
"""A checkpoint as ``torch.load`` returns it, of any format."""


class MigrationError(RunError):
    """A run that was not migrated; the message says what is on disk and what to do."""


def backup_name(found: int) -> str:
    """Where the checkpoint of format ``found`` stays while its migration runs."""
    return f"checkpoint.format{found}.pt"


# --- format 1 -> 2: rlmem 0.1's untyped dicts ------------------------------------------------

_STATES_THEN = ("model", "policy", "optimizer")
"""What rlmem 0.1 saved of its modules: our PPO's and the supervised ``model``, sb3's
``policy``, an ``optimizer`` (our PPO's one level down, under ``ppo``)."""

_PROGRESS_THEN = ("frames", "updates", "iteration", "elapsed_s", "cpu_s")
"""rlmem 0.1's counters."""

_EXTRAS_THEN = ("recent_returns", "observation", "num_actions")
"""What rlmem 0.1's PPO carried besides."""


def format_1_to_2(payload: Mapping[str, Any], source: str) -> Payload:
    """rlmem 0.1 saved one flat dict per trainer; format 2 sorts it into the fields of
    :class:`~rlmem.runs.checkpoint.Checkpoint`. The config is unchanged (``source``, the file,
    is not needed)."""
    states = {key: payload[key] for key in _STATES_THEN if key in payload}
    if "ppo" in payload:  # our PPO kept its optimizer one level down
        states["optimizer"] = payload["ppo"]["optimizer"]
    rng = {"torch": payload["rng"]} if "rng" in payload else {}
    if "generator" in payload:  # the supervised training stream
        rng["data"] = payload["generator"]
    return {"config": dict(payload["config"]),
            "progress": {key: payload[key] for key in _PROGRESS_THEN if key in payload},
            "states": states, "rng": rng,
            "extras": {key: payload[key] for key in _EXTRAS_THEN if key in payload},
            "format": 2}


# --- format 2 -> 3: every key written, at what the run did --------------------------------------

def _grid_encoding_then(config: dict[str, Any]) -> None:
    """An RL run before ``grid_encoding`` fed MiniGrid's grid to its conv net as raw floats."""
    config.setdefault("grid_encoding", "raw")


def _mission_decided(config: dict[str, Any], source: str) -> None:
    """An RL run that recorded ``mission: null`` (rlmem 0.1 left it to be derived) records
    what it derives to: whether its env's mission varies. Deciding makes the env, so a config
    naming code outside the trusted packages is refused first, as a run directory is data."""
    if config.get("mission") is None:
        refuse_untrusted_code(config, source=source, trusted=False)
        config["mission"] = with_derived_values(config)["mission"]


def _lstm_forget_bias_then(memory: dict[str, Any]) -> None:
    """A cell with an LSTM inside (one that has ``forget_bias``) kept torch's random
    forget-gate bias before the option existed, which ``forget_bias=None`` (without chrono)
    keeps."""
    if "forget_bias" in hyperparameters(get_cell_class(memory["name"])):
        memory.setdefault("forget_bias", None)
        memory.setdefault("chrono_t_max", None)


def _irnn_update_then(memory: dict[str, Any]) -> None:
    """iRNN before ``update_rule`` computed Eq. 5 with α learned."""
    if issubclass(get_cell_class(memory["name"]), IncrementalRNN):
        memory.setdefault("update_rule", IRNNUpdate.eq5.name)
        memory.setdefault("learn_alpha", True)


def _transfer_schedule_then(config: dict[str, Any]) -> None:
    """A supervised run before ``transfer_every`` evaluated its ``eval_seq_lens`` at every
    evaluation."""
    config.setdefault("transfer_every", config.get("eval_every"))


def _module_prefixes(state: Mapping[str, Any], names: Sequence[str]) -> Iterator[str]:
    """The prefixes under which ``state`` holds every key of ``names`` (a module's own state
    keys): one per copy of that module in the model (``memory.``, ``memory.layers.1.``)."""
    first = names[0]
    for key in state:
        if key.endswith(first):
            prefix = key[:-len(first)]
            if (not prefix or prefix.endswith(".")) and all(prefix + name in state
                                                             for name in names):
                yield prefix


def _irnn_weights_record_their_rule(state: dict[str, Any], memory: Mapping[str, Any]) -> None:
    """iRNN's weights record the update rule they were trained with (as their
    ``_extra_state``, which refuses another rule); weights saved before the option do not, and
    were trained with the rule the migrated config records. Found by the cell's own state
    keys, wherever the model holds the cell (one per layer, the actor's and the critic's)."""
    cls = get_cell_class(memory["name"])
    if not issubclass(cls, IncrementalRNN):
        return
    options = {key: value for key, value in memory.items() if key in hyperparameters(cls)}
    with torch.device("meta"):  # key names only: nothing is allocated
        cell = make_cell(memory["name"], input_size=1, hidden_size=int(memory["hidden_size"]),
                         **options)
    extra = "_extra_state"
    names = [key for key in cell.state_dict() if not key.endswith(extra)]
    rule = torch.tensor(IRNNUpdate[str(memory["update_rule"])].value)
    for prefix in list(_module_prefixes(state, names)):
        state.setdefault(prefix + extra, rule.clone())


def config_2_to_3(config: Mapping[str, Any], source: str) -> dict[str, Any]:
    """A config of format 2 (or 1) with the keys that changed what a run did since written
    at what they were: the steps' part of a config, before :func:`complete_config`."""
    migrated = dict(config)
    memory = dict(migrated["memory"])
    _lstm_forget_bias_then(memory)
    _irnn_update_then(memory)
    migrated["memory"] = memory
    if "agent" in migrated:
        _grid_encoding_then(migrated)
        _mission_decided(migrated, source)
    else:
        _transfer_schedule_then(migrated)
    return migrated


def format_2_to_3(payload: Mapping[str, Any], source: str) -> Payload:
    """Format 3 records every key; format 2 recorded those its rlmem had. Where runs did
    something other than today's default, the config says what they did, and the weights
    follow it (iRNN's recorded update rule); ``source`` names the file, for a message.

    One value is the nearest there is rather than the same: a GRU (``gru``, ``sarnn``) kept
    torch's random update-gate bias before ``update_bias``, which has no value for that; its
    default, 0, is the nearest. Only a fresh start would differ: a run resumes its weights."""
    config = config_2_to_3(payload["config"], source)
    states = {name: dict(state) if name != "optimizer" else state
              for name, state in payload["states"].items()}
    for name, state in states.items():
        if name != "optimizer":
            _irnn_weights_record_their_rule(state, config["memory"])
    return {**payload, "config": config, "states": states, "format": 3}


# --- format 3 -> 4: our PPO's presets ---------------------------------------------------------

def format_3_to_4(payload: Mapping[str, Any], source: str) -> Payload:
    """A run of our PPO from before its presets records the preset whose values it had
    (minigrid), a critic that shares the actor's memory and unscaled rewards
    (:func:`~rlmem.agents.ppo.presets.before_presets`); other runs change only the format
    (``source`` is not needed)."""
    config = dict(payload["config"])
    agent = config.get("agent")
    if isinstance(agent, Mapping) and agent.get("name") == "ppo":
        config["agent"] = dict(agent)
        before_presets(config["agent"])
    return {**payload, "config": config, "format": 4}


# --- format 4 -> 5: the run's arithmetic ------------------------------------------------------

def format_4_to_5(payload: Mapping[str, Any], source: str) -> Payload:
    """``flush_denormal``: every run before it computed with subnormal floats kept, which is
    the key's default (the completion writes the key). ``env_backend``: every RL run before it
    stepped gymnasium's envs, which today's default (``auto``: the tensor envs where an env has
    them) would not, so the config says so."""
    config = dict(payload["config"])
    if "agent" in config:
        config.setdefault("env_backend", GYMNASIUM)
    return {**payload, "config": config, "format": 5}


Step = Callable[[Mapping[str, Any], str], Payload]
"""One change of format: ``step(payload, source)`` is the payload of the next format
(``source`` names the file, for a message)."""

STEPS: dict[int, Step] = {1: format_1_to_2, 2: format_2_to_3, 3: format_3_to_4,
                          4: format_4_to_5}
"""The step from each older format to the next, keyed by the format it reads."""


# --- every key written ----------------------------------------------------------------------

_NO_DEFAULT = object()
"""The default of a field a run always sets itself (its cell, its agent, its run_dir)."""


def _defaults(schema: type) -> dict[str, Any]:
    """The defaults of a config dataclass as a run records them (enum members as their names),
    in the order of its fields; :data:`_NO_DEFAULT` for a field without one."""
    node = OmegaConf.structured(schema)
    values = OmegaConf.to_container(node, enum_to_str=True)
    assert isinstance(values, dict)  # a dataclass's container is a dict
    return {str(key): _NO_DEFAULT if OmegaConf.is_missing(node, str(key)) else value
            for key, value in values.items()}


def _with_defaults(recorded: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``recorded`` with every key of ``defaults`` it lacks, in the schema's order (as a run
    of today records it); keys the schema does not know stay, after them."""
    ordered = {key: recorded.get(key, value) for key, value in defaults.items()}
    return {**{key: value for key, value in ordered.items() if value is not _NO_DEFAULT},
            **{key: value for key, value in recorded.items() if key not in defaults}}


def _schema_of(section: str, name: str) -> type:
    """The config dataclass of ``<section>=<name>``: a cell's, an agent's or a task's.

    Raises:
        KeyError: no such one is registered here.
    """
    if section == "memory":
        return cell_config(name)
    if section == "agent":
        return AGENTS[name].config
    return TASK_SCHEMAS[name]


def complete_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (of the current format's meaning) with every key of today's schema written:
    the run's (:class:`~rlmem.schema.train.TrainConfig` or
    :class:`~rlmem.schema.supervised.SupervisedConfig`), its agent's or task's, and its cell's.
    A key it lacks takes today's default, which is what it did: an option whose default is
    not was set by a step (:data:`STEPS`).

    Raises:
        KeyError: its cell, agent or task is not registered here (the name).
    """
    section = "agent" if "agent" in config else "task"
    top = TrainConfig if section == "agent" else SupervisedConfig
    completed = _with_defaults(config, _defaults(top))
    for key in (section, "memory"):
        completed[key] = _with_defaults(config[key], _defaults(
            _schema_of(key, str(config[key]["name"]))))
    return completed


# --- one run ------------------------------------------------------------------------------------

def _shown(path: Path) -> str:
    """A few of a folder's entries, for a message."""
    entries = sorted(entry.name for entry in path.iterdir())
    return ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "") or "nothing"


def _runs_below(folder: Path) -> list[Path]:
    """A few run directories (folders with a checkpoint) up to three levels below ``folder``."""
    found: list[Path] = []
    for pattern in ("*/", "*/*/", "*/*/*/"):
        found.extend(path.parent for path in sorted(folder.glob(pattern + CHECKPOINT_NAME)))
        if found:
            break
    return found[:3]


def _check_run_dir(run_dir: Path) -> None:
    """Refuse what is not one run's directory, naming what it is.

    Raises:
        MigrationError: the path does not exist, is a file, or is a folder no rlmem run made.
    """
    what_to_give = ("Give the directory of one run: the folder that holds its checkpoint.pt "
                    "and config.yaml (runs/ppo/MemoryS7/lstm/seed0, for example).")
    if not run_dir.exists():
        raise MigrationError(f"{run_dir} does not exist. Nothing was changed. {what_to_give}")
    if not run_dir.is_dir():
        raise MigrationError(f"{run_dir} is a file, not a run directory. Nothing was changed. "
                             f"{what_to_give}")
    if (run_dir / MARKER).is_file() or is_unmarked_run(run_dir):
        return
    below = _runs_below(run_dir)
    hint = (f" It holds runs below it ({', '.join(map(str, below))}"
            f"{', ...' if len(below) == 3 else ''}): give each run's directory, for example "
            "with a shell glob." if below else "")
    raise MigrationError(
        f"{run_dir} is not an rlmem run directory: it has no {MARKER} marker, nor a "
        f"{CONFIG_NAME} recording a memory cell beside a {CHECKPOINT_NAME} (it holds "
        f"{_shown(run_dir)}). Nothing was read or changed.{hint or ' ' + what_to_give}")


def _migrated(payload: Mapping[str, Any], found: int, source: str) -> Payload:
    """``payload`` of format ``found`` through every step to :data:`FORMAT`, its config
    completed."""
    migrated = dict(payload)
    for version in range(found, FORMAT):
        migrated = STEPS[version](migrated, source)
    migrated["config"] = complete_config(migrated["config"])
    return migrated


def _as_payload(config: dict[str, Any], found: int) -> Payload:
    """A config alone as a checkpoint of format ``found`` without weights, so that the steps
    migrate ``config.yaml`` exactly as they migrate the checkpoint's config."""
    if found == 1:
        return {"config": config}
    return {"config": config, "progress": {}, "states": {}, "rng": {}, "extras": {},
            "format": found}


def _check_config(config: Any, source: str) -> None:
    """Refuse a config no rlmem run recorded: one without a cell, or neither an RL agent nor
    a supervised task; or one whose cell, agent or task is not registered here.

    Raises:
        MigrationError: naming what is missing and what to do.
    """
    def named(key: str) -> bool:
        return isinstance(config.get(key), dict) and isinstance(config[key].get("name"), str)

    if not isinstance(config, dict) or not named("memory") or not (named("agent")
                                                                   or named("task")):
        raise MigrationError(
            f"{source} records no config of an rlmem run (a memory cell, and an agent or a "
            "task, each with its name). Nothing was changed. It was altered or written by "
            "another program; migrate the runs rlmem wrote.")
    for key in ("memory", "agent" if named("agent") else "task"):
        try:
            _schema_of(key, config[key]["name"])
        except KeyError:
            what = {"memory": "cell", "agent": "agent", "task": "task"}[key]
            raise MigrationError(
                f"{source} records {key}={config[key]['name']}, which is no {what} this rlmem "
                "knows (a plug-in that is not installed here?), so the keys its run records "
                "cannot be completed. Nothing was changed. Install the package that provides "
                "it, then migrate the run again.") from None


def _read_config_yaml(path: Path) -> dict[str, Any] | None:
    """``config.yaml`` as plain data, or None where the run has none."""
    if not path.exists():
        return None
    try:
        recorded = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except (OSError, YAMLError, OmegaConfBaseException, UnicodeDecodeError) as error:
        raise MigrationError(
            f"{path} is unreadable ({type(error).__name__}: {error}), so it cannot be migrated "
            "with the checkpoint. Nothing was changed. Restore it, or move it away: the "
            "migration then writes it from the checkpoint's config.") from None
    if not isinstance(recorded, dict):
        raise MigrationError(
            f"{path} holds no config (a {type(recorded).__name__}). Nothing was changed. "
            "Restore it, or move it away: the migration then writes it from the checkpoint's "
            "config.")
    return {str(key): value for key, value in recorded.items()}


def _flat(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _override(value: Any) -> str:
    """A value as a command-line override spells it: null, true, 0.0, raw, []."""
    return json.dumps(value) if not isinstance(value, str) else value


def _changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """``key=value`` for every key ``after`` adds to ``before`` or changes."""
    old, new = _flat(before), _flat(after)
    return [f"{key}={_override(value)}" + (f" (was {_override(old[key])})" if key in old else "")
            for key, value in new.items() if key not in old or old[key] != value]


def _locked(run_dir: Path) -> RunLock:
    """The run's lock, held while it is migrated: no run trains there meanwhile.

    Raises:
        MigrationError: another process holds it.
    """
    lock = RunLock(run_dir)
    try:
        lock.acquire()
    except RunLockedError:
        try:
            holder = (run_dir / LOCK_NAME).read_text().strip() or "unknown"
        except OSError:
            holder = "unknown"
        raise MigrationError(
            f"{run_dir} is in use by another process (PID {holder}): a run is training in it. "
            "It was not migrated, and nothing was changed. Run the migration again once that "
            "run has stopped (or after stopping it).") from None
    return lock


def migrate_run(run_dir: Path) -> str:
    """Migrate the run in ``run_dir`` to :data:`FORMAT`; the line that reports it.

    Raises:
        MigrationError: it is no run directory, another process holds it, or its checkpoint
            or config cannot be read or written; the message says what is on disk.
        RunDirectoryError: it holds symlinks (nothing is written).
    """
    _check_run_dir(run_dir)
    refuse_symlinks(run_dir)
    path = run_dir / CHECKPOINT_NAME
    if not path.exists():
        return (f"{run_dir}: no {CHECKPOINT_NAME} yet, so nothing to migrate (the run starts "
                "afresh and records every key)")
    lock = _locked(run_dir)
    try:
        return _migrate_locked(run_dir, path)
    finally:
        lock.release()


def _format_of(backup: Path) -> int:
    """The format of a checkpoint kept by :func:`backup_name`."""
    return int(backup.name.removeprefix("checkpoint.format").removesuffix(".pt"))


def _leftover_backups(run_dir: Path) -> list[Path]:
    """Old checkpoints an interrupted migration left beside the run's checkpoint."""
    return [run_dir / backup_name(found) for found in range(1, FORMAT)
            if (run_dir / backup_name(found)).is_file()]


def _unreadable_remedy(run_dir: Path, leftovers: list[Path]) -> str:
    """What to do about a run whose checkpoint cannot be read (``leftovers``: the old
    checkpoints an interrupted migration left beside it)."""
    advice = (f"An earlier migration was cut short and left {leftovers[0].name} beside it, "
              f"the run's checkpoint from before it: move that back to {CHECKPOINT_NAME}, then "
              "migrate again." if leftovers else
              f"Restore {CHECKPOINT_NAME} from a copy if you have one; without it the run can "
              "only start afresh (resume=false).")
    return f"Nothing in {run_dir} was changed. {advice}"


def _migrated_config_yaml(config_path: Path, recorded: dict[str, Any], found: int,
                          leftovers: list[Path]) -> dict[str, Any]:
    """The run's ``config.yaml`` (``recorded``) migrated to the current format. It is of the
    checkpoint's format ``found``, unless a migration cut short after writing the checkpoint
    left it at the format of the old checkpoint it kept (one of ``leftovers``)."""
    written_as = min([found, *(_format_of(path) for path in leftovers)])
    _check_config(recorded, str(config_path))
    migrated: dict[str, Any] = _migrated(_as_payload(recorded, written_as), written_as,
                                         str(config_path))["config"]
    return migrated


def _migrate_locked(run_dir: Path, path: Path) -> str:
    """:func:`migrate_run` once the run's lock is held."""
    leftovers = _leftover_backups(run_dir)
    remedy = _unreadable_remedy(run_dir, leftovers)
    payload = load_payload(path, remedy=remedy)
    found = payload_format(path, payload, remedy)
    if found > FORMAT:
        raise MigrationError(
            f"{path} was written by a newer rlmem (format {found}; this rlmem writes format "
            f"{FORMAT}). Nothing was changed. Use that rlmem (or a newer one) with this run.")
    _check_config(payload["config"], str(path))
    migrated = _migrated(payload, found, str(path))
    checkpoint = checkpoint_from_payload(path, migrated, remedy)
    config_path = run_dir / CONFIG_NAME
    recorded = _read_config_yaml(config_path)
    config = (checkpoint.config if recorded is None
              else _migrated_config_yaml(config_path, recorded, found, leftovers))
    checkpoint_changes = found < FORMAT or migrated["config"] != payload["config"]
    config_changes = recorded != config
    if not (checkpoint_changes or config_changes or leftovers):
        return f"{run_dir}: already current (format {FORMAT}); nothing changed"

    backup = run_dir / backup_name(found)
    written: list[str] = []
    try:
        if checkpoint_changes:
            write_atomic(backup, path.read_bytes())
            save_checkpoint(path, checkpoint)
            written.append(CHECKPOINT_NAME)
        if config_changes:
            write_atomic(config_path, OmegaConf.to_yaml(config))
            written.append(CONFIG_NAME)
    except (OSError, CheckpointWriteError) as error:
        done = (f"{CHECKPOINT_NAME} is migrated and its old version is kept as {backup.name} "
                f"beside it; {CONFIG_NAME} is as it was" if written else
                f"{CHECKPOINT_NAME} and {CONFIG_NAME} are as they were")
        reason = error.__cause__ or error  # the OSError under a CheckpointWriteError
        raise MigrationError(
            f"{run_dir} could not be migrated: {reason}. {done}. Free some space or make the "
            "folder writable, then run the migration again.") from error
    try:
        load_checkpoint(path)
    except RunError as error:
        raise MigrationError(
            f"the migrated {path} does not read back ({error}). Its old version is kept as "
            f"{backup.name} beside it: move that back to {CHECKPOINT_NAME} before using the "
            "run, and report this as a bug of rlmem.migrate.") from error
    for leftover in {backup, *leftovers}:
        leftover.unlink(missing_ok=True)
    return _report(run_dir, found, payload, migrated, written, leftovers)


def _report(run_dir: Path, found: int, payload: Mapping[str, Any], migrated: Mapping[str, Any],
            written: list[str], leftovers: list[Path]) -> str:
    """One line: what the migration of ``run_dir`` changed."""
    if found == FORMAT:
        head = f"{run_dir}: completed (format {FORMAT})"
    else:
        head = (f"{run_dir}: migrated from format {found}"
                f"{' (rlmem 0.1)' if found == 1 else ''} to {FORMAT}")
    parts = []
    keys = _changes(payload["config"], migrated["config"])
    if keys:
        parts.append(f"recorded {', '.join(keys)}")
    before = (format_1_to_2(payload, "") if found == 1 else payload)["states"]
    weights = sorted(f"{name}.{key}" for name, state in migrated["states"].items()
                     if name != "optimizer" for key in state if key not in before[name])
    if weights:
        parts.append(f"weights record {', '.join(weights)}")
    if leftovers:
        parts.append(f"removed {', '.join(path.name for path in leftovers)} left by an "
                     "interrupted migration")
    files = " and ".join(written) or "no file"
    return f"{head} ({files} rewritten): " + ("; ".join(parts) or "the checkpoint's layout")


# --- the CLI ------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    """``python -m rlmem.migrate <run_dir> [<run_dir> ...]``: each run gets one line (or one
    paragraph on stderr where it was not migrated); the status is 1 if any was not."""
    parser = argparse.ArgumentParser(
        prog=f"python -m {PROGRAM}",
        description="Rewrite runs written by an older rlmem (their checkpoint.pt and "
                    "config.yaml) to the current format, writing every key of their config "
                    "at the value the run had. A run already current is left as it is.")
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="run_dir",
                        help="a run directory (the folder holding checkpoint.pt)")
    args = parser.parse_args(argv)
    failed = 0
    try:
        for run_dir in args.run_dirs:
            try:
                print(migrate_run(run_dir), flush=True)
            except USER_ERRORS as error:
                message = str(error.args[0] if isinstance(error, KeyError) and error.args
                              else error)
                print(f"{PROGRAM}: error: {message}", file=sys.stderr, flush=True)
                failed += 1
    except KeyboardInterrupt:
        print(f"{PROGRAM}: interrupted: the run being migrated is either as it was or "
              "migrated (every file is replaced whole); run the same command again to finish.",
              file=sys.stderr, flush=True)
        return INTERRUPTED
    if failed and len(args.run_dirs) > 1:
        others = "; the others are current" if failed < len(args.run_dirs) else ""
        print(f"{PROGRAM}: {failed} of {len(args.run_dirs)} runs were not migrated (see "
              f"above){others}.", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""The default run directory of a run: one per config that trains something else.

Running the same command twice resumes one run, so the default ``run_dir`` is a function of
the config. It used to hold only the task (or env), the cell and the seed: a transfer-copy run,
a paper's preset and a plain copy run of the same cell shared a folder, and the second one
either failed on the first one's checkpoint or silently continued it. Now every key that changes
what is trained (:attr:`RunNaming.keys`) is in the name when it differs from its default:

- ``python -m rlmem.train``: ``<agent>/<env>/<label>[+<key>-<value>...]/seed<seed>`` under
  ``runs`` (a sweep's ``hydra.sweep.dir``), e.g. ``ppo/DoorKey-5x5/relstm/seed0`` and
  ``ppo/DoorKey-5x5/relstm+grid_encoding-raw+memory.hidden_size-128/seed0``;
- ``python -m rlmem.supervised``: ``<task>/<label>_T<seq_len>[+<key>-<value>...]_seed<seed>``
  under ``runs/supervised``, e.g. ``copy/lstm_T100_seed0`` and
  ``transfer_copy/relstm_T100+memory.hidden_size-128_seed0``.

A name holds only characters that neither a shell nor Hydra reads (letters, digits, ``._+-``),
so a folder rlmem prints can be pasted unquoted into ``run=`` and tab-completed (``=``, ``:``
and ``@`` end a word for bash's completion, ``,`` and ``=`` are Hydra's syntax). Keys hold no
``-``, so each ``<key>-<value>`` splits at its first ``-``; a value holding a ``+`` is hashed.
An earlier rlmem (0.2) joined the settings with ``,`` and ``=`` (``relstm,grid_encoding=raw``):
a run of such a name is found and resumed where it is (:func:`existing_run_dir`).

The label is the cell; with a preset (``+preset=<name>``) or a recipe it is the preset's name,
and the keys shown are those the command line sets on top of it (the preset's own values are
its name). The default of a key is its schema's (the run's dataclass, the cell's and the
agent's), and that of a task file that sets run keys (``task=transfer_copy``'s
``eval_seq_lens``). A value that cannot be written in a folder name as it is (a list of
wrappers, a path) or a name longer than :data:`MAX_READABLE` characters gets a short hash of
all the differing values, so two configs never share a folder. The budget (``frames``,
``iterations``) is not in the name: raising it resumes the run. Neither is anything that does not
change what is trained (``device``, ``progress_bar``, ``confirm_batches``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from rlmem.cells import CELLS, cell_config
from rlmem.schema.memory import CONF_DIR, MEMORY_GROUP

MAX_READABLE = 96
"""The longest readable part of a name; beyond it, the rest is a hash."""

LABEL_GROUPS = ("preset", "recipe")
"""Groups whose choice labels a run in place of its cell (``+preset=<name>``)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")

SETTING, VALUE = "+", "-"
"""What joins the label and each setting (``relstm+lr-0.001``), and a setting's key and value."""

LEGACY_SETTING, LEGACY_VALUE = ",", "="
"""The same, in the names of an earlier rlmem (0.2) (``relstm,lr=0.001``)."""


@dataclass(frozen=True)
class RunNaming:
    """What names a program's runs."""

    keys: tuple[str, ...]
    """Top-level keys (sections) whose values, where they differ from the defaults, are in the
    name; the keys of the path itself (env, seed, ...) are not among them."""
    in_path: frozenset[str]
    """Dotted keys written elsewhere in the path (``memory.name`` as the label)."""


def _plain(node: Any) -> Any:
    if isinstance(node, DictConfig) or OmegaConf.is_list(node):
        return OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    return getattr(node, "name", node) if not isinstance(node, (str, int, float, bool)) \
        and node is not None else node


def flatten(value: Any, prefix: str) -> dict[str, Any]:
    """``{prefix: value}`` with mappings flattened into dotted keys (an empty mapping stays)."""
    if isinstance(value, Mapping) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{prefix}.{key}"))
        return flat
    return {prefix: value}


def schema_defaults(cls: type, prefix: str = "") -> dict[str, Any]:
    """The flattened defaults of config dataclass ``cls``'s fields, keys prefixed with
    ``prefix`` (a required field is absent)."""
    node = OmegaConf.structured(cls)
    flat: dict[str, Any] = {}
    for key in node:
        if OmegaConf.is_missing(node, key):
            continue
        flat.update(flatten(_plain(node[key]), f"{prefix}{key}"))
    return flat


def _choices() -> dict[str, str]:
    """The group choices of this Hydra run (none outside a Hydra application)."""
    if not HydraConfig.initialized():
        return {}
    return {str(key): str(value) for key, value in HydraConfig.get().runtime.choices.items()
            if value is not None}


def _command_line_keys() -> list[tuple[str, bool]]:
    """The keys this Hydra run's command line sets, each with whether it is a group choice."""
    if not HydraConfig.initialized():
        return []
    from hydra.core.override_parser.overrides_parser import OverridesParser

    choices = _choices()
    overrides = OverridesParser.create().parse_overrides(list(HydraConfig.get().overrides.task))
    return [(override.key_or_group, override.key_or_group in choices)
            for override in overrides]


def _render(value: Any, setting: str) -> tuple[str, bool]:
    """A value as a file name can hold it, and whether that is exact (and unambiguous: no
    ``setting`` separator in it)."""
    if value is None or isinstance(value, bool):
        text = json.dumps(value)
    elif isinstance(value, list) and all(isinstance(item, (int, float, str)) for item in value):
        text = "-".join(str(item) for item in value) or "[]"
    elif isinstance(value, (dict, list)):
        return "", False
    else:
        text = str(value)
    safe = _UNSAFE.sub("_", text)
    return safe, safe == text and setting not in text


def describe(differences: Mapping[str, Any], setting: str = LEGACY_SETTING,
             value: str = LEGACY_VALUE) -> str:
    """``key=value`` parts joined by commas (or ``value`` and ``setting``), then a hash of all
    of them where a value cannot be shown exactly or the whole is longer than
    :data:`MAX_READABLE`. An evaluation's file name takes it as it is
    (``..._seed0,capacity=2560``); a run folder's, :func:`folder_settings`."""
    parts, exact = [], True
    for key, item in sorted(differences.items()):
        text, shown = _render(item, setting)
        exact = exact and shown
        parts.append(f"{key}{value}{text}" if text else key)
    readable = setting.join(parts)
    if exact and len(readable) <= MAX_READABLE:
        return readable
    digest = hashlib.sha256(json.dumps(sorted(differences.items()), default=str)
                            .encode()).hexdigest()[:8]
    kept: list[str] = []
    for part in parts:  # whole parts only, while they fit
        if len(setting.join([*kept, part])) > MAX_READABLE:
            break
        kept.append(part)
    return setting.join([*kept, digest])


def folder_settings(differences: Mapping[str, Any]) -> str:
    """:func:`describe` for a run folder's name: ``key-value`` parts joined by ``+``, nothing a
    shell or Hydra reads."""
    return describe(differences, SETTING, VALUE)


def labelled(label: str, settings: str) -> str:
    """The label followed by the settings it differs by (:func:`describe`), if any."""
    return f"{label}{SETTING}{settings}" if settings else label


def legacy_name(name: str) -> str:
    """The folder name an earlier rlmem (0.2) gave the run named ``name``: ``,`` between the
    settings and ``=`` in each (``relstm+lr-0.001`` was ``relstm,lr=0.001``)."""
    label, *settings = name.split(SETTING)
    return LEGACY_SETTING.join([label, *(setting.replace(VALUE, LEGACY_VALUE, 1)
                                         for setting in settings)])


def existing_run_dir(run_dir: Path) -> Path:
    """``run_dir``, or the folder an older rlmem gave the same run (:func:`legacy_name` of its
    last two parts: the label and the seed folder, or the task and the run) when only that
    one exists: the same command resumes it there."""
    if run_dir.exists() or len(run_dir.parts) < 2:
        return run_dir
    older = run_dir.parent.parent / legacy_name(run_dir.parent.name) / legacy_name(run_dir.name)
    if older != run_dir and older.is_dir():
        print(f"the run is in {older}, the folder an earlier rlmem named it; it stays there",
              flush=True)
        return older
    return run_dir


def differences(root: DictConfig, naming: RunNaming, defaults: Mapping[str, Any]
                ) -> dict[str, Any]:
    """The dotted keys under ``naming.keys`` whose value in ``root`` is not their default."""
    found: dict[str, Any] = {}
    for section in naming.keys:
        if section not in root:
            continue
        for key, value in flatten(_plain(root[section]), section).items():
            if key not in naming.in_path and (key not in defaults or defaults[key] != value):
                found[key] = value
    return found


def label_and_differences(root: DictConfig, naming: RunNaming, defaults: Mapping[str, Any],
                          label: str | None) -> tuple[str, dict[str, Any]]:
    """The run's label and the values its name shows: with a preset or recipe (``label``, or
    this Hydra run's choice), what the command line sets on top of it; else the cell and
    what differs from ``defaults``."""
    chosen = next((_choices()[group] for group in LABEL_GROUPS if group in _choices()), None)
    if label is None and chosen is None:
        return str(root[MEMORY_GROUP]["name"]), differences(root, naming, defaults)
    name = label if label is not None else str(chosen)
    shown: dict[str, Any] = {}
    for key, is_group in _command_line_keys():
        bare = key.lstrip("+~")
        if is_group and bare in naming.keys:
            if str(root[bare]["name"]) not in name.split("_"):  # not already in the label
                shown[bare] = root[bare]["name"]
        elif not is_group and bare.split(".")[0] in naming.keys:
            value = OmegaConf.select(root, bare, default=None)
            shown.update(flatten(_plain(value), bare))
    return name, shown


def task_choice(name: str) -> str:
    """The ``task=`` choice of this Hydra run (``transfer_copy``), else the task's ``name``."""
    return _choices().get("task", name)


def task_file_defaults(choice: str) -> dict[str, Any]:
    """The run keys a task file sets for the whole config (``transfer_copy``'s
    ``eval_seq_lens``): the defaults of a run of that task."""
    path = CONF_DIR / "task" / f"{choice}.yaml"
    if not path.is_file():
        return {}
    loaded = OmegaConf.load(path)
    assert isinstance(loaded, DictConfig)
    values = OmegaConf.to_container(loaded, resolve=False)
    assert isinstance(values, dict)
    return {str(key): value for key, value in values.items()
            if key not in ("defaults", "name", "alphabet", "recall")}


def cell_defaults(root: DictConfig) -> dict[str, Any]:
    """The flattened defaults of ``root``'s cell, or none for a cell not registered."""
    name = str(root[MEMORY_GROUP]["name"])
    return schema_defaults(cell_config(name), f"{MEMORY_GROUP}.") if name in CELLS else {}

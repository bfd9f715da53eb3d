"""Run folders read back for comparison: each run's setting, seed, learning curve and final
measure, and the runs grouped by setting.

A run folder is what ``python -m rlmem.train`` (our PPO or ``agent=sb3``) and
``python -m rlmem.supervised`` write: ``config.yaml`` beside ``progress.csv`` (and, for a
finished supervised run, ``results.json``). Its **setting** is its config minus what does not
change what is trained (:data:`NOT_SETTING`: the seed, the run directory, the device, ...): the
runs of one setting are the seeds of one experiment. Its **measure** is the number its CLI
ends with:

- an RL run: ``return_recent``, the mean return of the last 100 episodes, at its last row
  (``progress.csv``), over frames;
- a supervised run: its task's score at its training delay ``T`` (copy's ``accuracy@T100``,
  adding's ``mse@T200``), from ``results.json`` when it finished, else its last evaluation in
  ``progress.csv``, over iterations.

A folder is data, never code: ``config.yaml`` is read with ``yaml.safe_load`` and nothing it
names is imported.

Shapes:
    - :attr:`Run.x`, :attr:`Run.y`: ``(points,)``, the curve's steps and values.
"""

from __future__ import annotations

import glob
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray

from rlmem.runs.progress import read_progress
from rlmem.schema.run_names import flatten
from rlmem.tasks import TASKS

NOT_SETTING = frozenset({
    "seed", "run_dir", "resume", "force", "trust_run_config", "progress_bar", "device",
    "torch_threads", "figures", "confirm_batches", "frames", "iterations", "stop_return",
    "target", "eval_every", "log_every", "checkpoint_every", "transfer_every",
    "eval_batch_size", "warm_start"})
"""Top-level keys that do not make two runs different experiments: the seed, where the run
lives and how it is shown, and its budget and stopping rule (a run stopped early by
``stop_return`` is one seed of the same experiment)."""

RL_MEASURE = "return_recent"
"""The RL runs' measure: the mean return of the last 100 episodes."""

LOWER_IS_BETTER = ("ce", "mse", "loss")
"""Measures where lower is better: a name, or a part of it between ``/`` and before ``@``,
that starts with one of these (``loss/value``, ``ce@T200``)."""

SKIPPED = ("previous", "eval", "tb")
"""Folders inside a run that hold no run of their own to collect (``previous/`` keeps the runs
``resume=false`` moved aside: earlier, not further, seeds)."""


class NotARunError(ValueError):
    """A path given for comparison holds no readable run."""


@dataclass(frozen=True)
class Measure:
    """What is compared: a column of the runs' curves and which way is better."""

    name: str
    higher_is_better: bool
    steps: str
    """What the curve's x counts: ``frames`` or ``iterations``."""

    def better(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """``values`` oriented so that higher is better (negated otherwise): the statistics
        (P(improvement), k of n, the profile) are written for higher-is-better scores."""
        return values if self.higher_is_better else -values


@dataclass(frozen=True)
class Run:
    """One run folder, read back."""

    path: Path
    kind: str
    """``ppo``, ``sb3`` or ``supervised``."""
    seed: int
    setting: Mapping[str, Any]
    """The flattened config minus :data:`NOT_SETTING` (dotted keys: ``memory.hidden_size``)."""
    family: str
    """What its measure is comparable within: the env (RL) or the task at its ``T``."""
    measure: Measure
    x: NDArray[np.float64]
    y: NDArray[np.float64]
    final: float | None
    """The measure at the end of the run, or None when it has none yet (no episode ended)."""


@dataclass
class Group:
    """The runs of one setting: the seeds of one experiment."""

    setting: Mapping[str, Any]
    runs: list[Run] = field(default_factory=list)
    label: str = ""
    """What tells it from the other groups of its family (:func:`label_groups`)."""

    @property
    def finals(self) -> NDArray[np.float64]:
        """``(seeds,)``: the final measure of each run that has one."""
        return np.array([run.final for run in self.runs if run.final is not None])

    @property
    def measure(self) -> Measure:
        return self.runs[0].measure

    @property
    def family(self) -> str:
        return self.runs[0].family


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise NotARunError(f"{path} cannot be read as YAML ({type(error).__name__}: {error})"
                           ) from None
    if not isinstance(loaded, dict):
        raise NotARunError(f"{path} holds no mapping of settings")
    return loaded


def _lower_is_better(name: str) -> bool:
    return any(part.startswith(LOWER_IS_BETTER) for part in name.split("@")[0].split("/"))


def _curve(path: Path, step: str, column: str) -> tuple[NDArray[np.float64],
                                                        NDArray[np.float64]]:
    """``column`` of ``path/progress.csv`` against ``step``, its finite values only."""
    points = [(row.number(step), row.finite(column)) for row in read_progress(path)
              if row.has(step)] if path.is_file() else []
    kept = [(x, y) for x, y in points if y is not None]
    return (np.array([x for x, _ in kept], dtype=np.float64),
            np.array([y for _, y in kept], dtype=np.float64))


def _rl_run(path: Path, config: Mapping[str, Any], measure: str | None) -> Run:
    name = measure or RL_MEASURE
    x, y = _curve(path / "progress.csv", "frames", name)
    agent = config.get("agent") or {}
    return Run(path, str(agent.get("name", "ppo")), int(config["seed"]), _setting(config),
               f"env {config['env']}", Measure(name, not _lower_is_better(name), "frames"),
               x, y, float(y[-1]) if y.size else None)


def _supervised_run(path: Path, config: Mapping[str, Any], measure: str | None) -> Run:
    task = config["task"]
    seq_len = int(config["seq_len"])
    cls = TASKS.get(str(task["name"]))
    if measure is None:
        if cls is None:
            raise NotARunError(f"{path}: task {task['name']!r} is not one rlmem knows; name "
                               "the measure with --measure")
        measure = f"{cls.score}@T{seq_len}"
    elif "@" not in measure:
        measure = f"{measure}@T{seq_len}"
    higher = (cls.score_higher_is_better if cls is not None and measure.startswith(cls.score)
              else not _lower_is_better(measure))
    x, y = _curve(path / "progress.csv", "iteration", f"eval/{measure}")
    final = float(y[-1]) if y.size else None
    results = path / "results.json"
    if results.is_file():
        try:
            value = json.loads(results.read_text()).get("eval", {}).get(measure)
        except (OSError, ValueError) as error:
            raise NotARunError(f"{results} cannot be read ({error})") from None
        if isinstance(value, (int, float)) and math.isfinite(value):
            final = float(value)
    return Run(path, "supervised", int(config["seed"]), _setting(config),
               f"task {task['name']} T={seq_len}", Measure(measure, higher, "iterations"),
               x, y, final)


def _setting(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config minus :data:`NOT_SETTING`, flattened into dotted keys; a list (or an empty
    mapping) as its JSON text, so that every value hashes and prints as written."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if key not in NOT_SETTING:
            flat.update(flatten(value, str(key)))
    return {key: json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value
            for key, value in flat.items()}


def read_run(path: Path, measure: str | None = None) -> Run:
    """The run in folder ``path``, its measure ``measure`` (a ``progress.csv`` column for an RL
    run, a score of the task for a supervised one, ``accuracy`` or ``ce@T200``) or the
    default one.

    Raises:
        NotARunError: ``path`` has no ``config.yaml`` of an rlmem run, or it cannot be read.
    """
    config_path = path / "config.yaml"
    if not config_path.is_file():
        raise NotARunError(f"{path} is not a run folder (it has no config.yaml)")
    config = _read_yaml(config_path)
    try:
        if "task" in config:
            return _supervised_run(path, config, measure)
        if "env" in config:
            return _rl_run(path, config, measure)
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, NotARunError):
            raise
        raise NotARunError(f"{config_path} is not the config of an rlmem run "
                           f"({type(error).__name__}: {error})") from None
    raise NotARunError(f"{config_path} records neither an env (rlmem.train) nor a task "
                       "(rlmem.supervised)")


def run_folders(patterns: Iterable[str]) -> list[Path]:
    """The run folders that ``patterns`` name: each a run folder, a folder holding runs at any
    depth, or a glob of either (``runs/ppo/MemoryS7/*/seed*``), in sorted order, each once.

    Raises:
        NotARunError: a pattern matches nothing, or nothing that holds a run.
    """
    found: dict[Path, None] = {}
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) or (
            [pattern] if Path(pattern).exists() else [])
        if not matches:
            raise NotARunError(f"{pattern} matches no file or folder")
        before = len(found)
        for match in matches:
            found.update(dict.fromkeys(_runs_under(Path(match))))
        if len(found) == before and not any(Path(match) in found for match in matches):
            raise NotARunError(f"{pattern} holds no run folder (a folder with config.yaml "
                               "written by rlmem.train or rlmem.supervised)")
    return list(found)


def _runs_under(path: Path) -> list[Path]:
    if not path.is_dir():
        return []
    if (path / "config.yaml").is_file():
        return [path]
    return [run for child in sorted(path.iterdir()) if child.name not in SKIPPED
            for run in _runs_under(child)]


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """``runs`` grouped by setting (and measure), in the order each setting first appears,
    labelled within each family (:func:`label_groups`)."""
    groups: dict[tuple[Any, ...], Group] = {}
    for run in runs:
        key = (run.family, run.measure, tuple(sorted(run.setting.items(), key=lambda kv: kv[0])))
        groups.setdefault(key, Group(run.setting)).runs.append(run)
    ordered = list(groups.values())
    for family in dict.fromkeys(group.family for group in ordered):
        label_groups([group for group in ordered if group.family == family])
    return ordered


def label_groups(groups: Sequence[Group]) -> None:
    """Label each group by the settings that tell it from the others: the keys whose values
    differ between them, where a section's choice (``memory.name``) differs shown as
    ``memory=gru`` and not by the keys that come with it; a lone group by its cell."""
    keys = sorted({key for group in groups for key in group.setting})
    varying = [key for key in keys
               if len({repr(group.setting.get(key)) for group in groups}) > 1]
    for group in groups:
        parts = []
        for key in varying:
            section, _, leaf = key.rpartition(".")
            if leaf == "name" and section:
                parts.append(f"{section}={group.setting.get(key)}")
            elif not _follows_choice(key, group, groups):
                parts.append(f"{key}={group.setting.get(key, '-')}")
        group.label = " ".join(parts) or str(group.setting.get("memory.name", "run"))


def _follows_choice(key: str, group: Group, groups: Sequence[Group]) -> bool:
    """Whether ``key`` varies only as its section's choice does: a key of a section whose
    ``name`` varies, equal in every group of ``group``'s choice."""
    section = key.split(".")[0]
    choice = f"{section}.name"
    names = {repr(other.setting.get(choice)) for other in groups}
    if len(names) < 2:
        return False
    same = [other for other in groups if other.setting.get(choice) == group.setting.get(choice)]
    return len({repr(other.setting.get(key)) for other in same}) == 1


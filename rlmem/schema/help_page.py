"""The ``--help`` page of a CLI: its purpose, examples, every key of its config with its value
and description, the groups it offers (cells, agents, tasks, presets), and the env short names.

Built from the composed config of the command line (``memory=relstm --help`` describes ReLSTM's
keys) and from the code: descriptions come from the config dataclasses' field docstrings and
the cells' ``Args:`` (:mod:`rlmem.schema.field_docs`), choices from the registries (cells,
agents, envs) and the ``rlmem/conf`` folders (tasks, presets, recipes).
"""

from __future__ import annotations

import dataclasses
import shutil
import textwrap

from omegaconf import DictConfig, OmegaConf

from rlmem.agents.ppo.presets import PRESETS, Preset
from rlmem.cells import CELLS
from rlmem.envs import ENVS
from rlmem.schema.field_docs import cell_docs, field_docs
from rlmem.schema.memory import CONF_DIR, MEMORY_GROUP
from rlmem.schema.program import CommandLine

WIDTH = 100
"""The page's widest line (narrower terminals get narrower lines)."""

GROUP_HELP = {
    "memory": "the memory cell (its keys: memory.<key>=value)",
    "agent": "the trainer (its keys: agent.<key>=value)",
    "task": "the supervised task (its keys: task.<key>=value)",
    "+preset": "a paper's setting: task, cell and hyperparameters at once",
    "+recipe": "a tested setting of env, budget and encodings",
}
"""What each group selects, in a phrase."""


UNDECIDED_SIZE = ("null: the agent decides it, our PPO by its preset ("
                  + ", ".join(f"{preset.name} {PRESETS[preset].memory_size}" for preset in Preset)
                  + "), and the run records the size it took.")
"""How ``rlmem.train``'s null memory size is read (``rlmem/conf/train.yaml``)."""


def _width() -> int:
    return min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def _shown(node: DictConfig, key: str) -> str:
    """A key's value as a command line would give it; ``???`` for a required one."""
    if OmegaConf.is_missing(node, key):
        return "???"
    try:
        value = node[key]
    except Exception:  # an interpolation that needs a Hydra run (runs_root in a sweep)
        value = node._get_node(key)._value()  # type: ignore[union-attr]
    if isinstance(value, DictConfig) or OmegaConf.is_list(value):
        return str(OmegaConf.to_container(value, resolve=False))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(getattr(value, "name", value))


def _entries(node: DictConfig, docs: dict[str, str], prefix: str, skip: set[str]) -> list[str]:
    width = _width()
    lines = []
    for key in node:
        name = str(key)
        if name in skip:
            continue
        lines.append(f"  {prefix}{name}={_shown(node, name)}")
        if docs.get(name):
            lines.extend(textwrap.wrap(docs[name], width, initial_indent=" " * 6,
                                       subsequent_indent=" " * 6))
    return lines


def _choices(group: str) -> list[str]:
    """The choices of a group: the registered cells, agents, or the YAML files of a folder."""
    name = group.lstrip("+")
    if name == MEMORY_GROUP:
        return sorted(CELLS)
    if name == "agent":
        from rlmem.agents.registry import AGENTS

        return sorted(AGENTS)
    return sorted(path.stem for path in (CONF_DIR / name).glob("*.yaml"))


def _schema_docs(node: DictConfig) -> dict[str, str]:
    kind = OmegaConf.get_type(node)
    return field_docs(kind) if isinstance(kind, type) and dataclasses.is_dataclass(kind) else {}


def help_page(line: CommandLine, cfg: DictConfig) -> str:
    """The help page of ``line`` for its composed config ``cfg``."""
    width = _width()
    command = line.command
    sections = ["\n".join(textwrap.wrap(f"{command}: {line.purpose}", width)),
                "Examples:\n" + "\n".join(f"  {command} {example}" for example in line.examples)]
    groups = [group for group in line.groups]
    if groups:
        rows = []
        for group in groups:
            name = group.lstrip("+")
            current = (f" (now {cfg[name]['name']})" if name in cfg
                       and isinstance(cfg[name], DictConfig) and "name" in cfg[name] else "")
            rows.append(f"  {group}=<name>: {GROUP_HELP.get(group, '')}{current}")
            rows.extend(textwrap.wrap(", ".join(_choices(group)), width,
                                      initial_indent=" " * 6, subsequent_indent=" " * 6))
        sections.append("Groups (choose one with group=<name>; + adds an optional one):\n"
                        + "\n".join(rows))
    group_keys = {group.lstrip("+") for group in groups}
    sections.append(f"Keys ({command} key=value; the value shown is the default):\n"
                    + "\n".join(_entries(cfg, _schema_docs(cfg), "", group_keys)))
    for name in sorted(group_keys & {str(key) for key in cfg}):
        node = cfg[name]
        if not isinstance(node, DictConfig):
            continue
        chosen = node.get("name", name)
        docs = cell_docs(chosen) if name == MEMORY_GROUP and chosen in CELLS else \
            _schema_docs(node)
        if name == MEMORY_GROUP and node.get("hidden_size", 0) is None:
            docs = {**docs, "hidden_size": f"{docs.get('hidden_size', '')} {UNDECIDED_SIZE}"}
        sections.append(f"Keys of {name}={chosen} ({name}.<key>=value; `{command} "
                        f"{name}=<other> --help` shows another's):\n"
                        + "\n".join(_entries(node, docs, f"{name}.", {"name"})))
    if line.shows_envs:
        targets = {spec.transfer for spec in ENVS.values()}
        pairs = [f"{short} -> {spec.transfer}" if spec.transfer else short
                 for short, spec in ENVS.items() if short not in targets]
        sections.append("Envs (env=<short name>; -> marks the transfer target that env=transfer "
                        "evaluates; any registered gymnasium id works too):\n"
                        + "\n".join(textwrap.wrap(", ".join(pairs), width, initial_indent="  ",
                                                  subsequent_indent="  ")))
    sections.extend("\n".join(textwrap.wrap(note, width)) for note in line.notes)
    sections.append("\n".join(textwrap.wrap(
        "Hydra: -m runs a sweep (memory=lstm,relstm seed=0,1,2); --cfg job prints the "
        "composed config; --hydra-help lists Hydra's own flags.", width)))
    return "\n\n".join(sections)

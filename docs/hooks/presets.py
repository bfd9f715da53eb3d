"""MkDocs hook: the table of supervised presets, generated from the presets themselves.

A preset (``+preset=<name>``) is a YAML file whose header comment quotes its source: the paper,
table and row, what the paper leaves open and how it is filled. This hook reads every preset of
the library (``rlmem/conf/preset/``) and of the supervised suite
(``experiments/supervised/conf/preset/``) at each build and writes ``reference/presets.md``:
the header comment, the task, cell and ``T`` from the YAML, and its time on the project's
machine from ``experiments/supervised/preset_times.json`` (written by
``python -m experiments.supervised.preset_times`` from the runs there, or from a measured
prefix of a preset that has none). A new preset is a new row, and a preset without a header
comment is logged as a warning, which fails a strict build.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
"""The repository's root."""

PAGE = "reference/presets.md"
"""Where the generated page sits in the site."""

FOLDERS = (
    ("The papers' settings", "rlmem/conf/preset",
     "Installed with rlmem: `python -m rlmem.supervised +preset=<name> seed=<k>`."),
    ("The supervised suite's ablations and curricula", "experiments/supervised/conf/preset",
     "Not a paper's setting, and not installed: from the repository's root, "
     "`python -m rlmem.supervised 'hydra.searchpath=[file://experiments/supervised/conf]' "
     "+preset=<name> seed=<k>` (see `experiments/README.md`)."),
)
"""Each table: its heading, the presets' folder (relative to the root) and how to run one."""

TIMES = REPO / "experiments" / "supervised" / "preset_times.json"
"""Each preset's time here, in words (``experiments/supervised/preset_times.py``)."""

LOG = logging.getLogger("mkdocs.plugins.rlmem.presets")
"""Warnings here fail a strict build."""


@dataclass(frozen=True)
class Preset:
    """One preset file, as the table shows it."""

    name: str
    """``+preset=<name>``."""
    header: str
    """Its header comment, one paragraph (the commands it quotes left out: the page says how
    to run a preset)."""
    values: dict[str, Any]
    """The YAML itself."""

    def choice(self, group: str) -> str:
        """The option the preset selects for ``group`` (``task``, ``memory``), or ``""``."""
        for entry in self.values.get("defaults", []):
            if isinstance(entry, dict):
                for key, value in entry.items():
                    if key.removeprefix("override ").strip("/") == group:
                        return str(value)
        return ""


def read_preset(path: Path) -> Preset:
    """The preset in ``path``: its header comment (the leading ``#`` lines but Hydra's
    ``@package`` line and the commands: a line indented under ``#`` that starts with
    ``python``, and the lines indented further that continue it)."""
    text = path.read_text(encoding="utf-8")
    header: list[str] = []
    in_command = False
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        comment = line[1:]
        in_command = bool(re.match(r"\s{2,}python ", comment)
                          or (in_command and re.match(r"\s{4,}\S", comment)))
        if not (in_command or comment.strip().startswith("@package")):
            header.append(comment.strip())
    return Preset(path.stem, " ".join(" ".join(header).split()), yaml.safe_load(text) or {})


def presets(folder: Path) -> Iterator[Preset]:
    """Every preset of ``folder``, by name."""
    for path in sorted(folder.glob("*.yaml")):
        preset = read_preset(path)
        if not preset.header:
            LOG.warning("presets: %s has no header comment saying where its settings come from",
                        path.relative_to(REPO))
        yield preset


def escaped(text: str) -> str:
    """``text`` for a Markdown table cell: pipes, emphasis marks and tag-like ``<`` escaped."""
    return re.sub(r"<(?=[A-Za-z/])", "&lt;", text.replace("|", "\\|").replace("*", "\\*"))


def time_here(name: str) -> str:
    """The time of preset ``name`` on the project's machine, as :data:`TIMES` words it."""
    entry = json.loads(TIMES.read_text(encoding="utf-8")).get(name) if TIMES.exists() else None
    if entry is None:
        return ("not measured yet (`python -m experiments.supervised.preset_times "
                f"--measure {name}`)")
    return str(entry["time"])


def row(preset: Preset) -> str:
    """The table row of ``preset``."""
    delay = preset.values.get("seq_len", "")
    delays = f"{preset.values.get('seq_len_min')}–{delay}" if preset.values.get(
        "seq_len_min") else str(delay)
    evaluated = ", ".join(str(t) for t in preset.values.get("eval_seq_lens", []))
    return (f"| `{preset.name}` | {preset.choice('task')} | {preset.choice('memory')} "
            f"| {delays}{f' (evaluated at {evaluated})' if evaluated else ''} "
            f"| {escaped(time_here(preset.name))} | {escaped(preset.header)} |")


def render() -> str:
    """The presets page, in Markdown."""
    lines = ["# Presets", "",
             "A preset loads a setting of `python -m rlmem.supervised` in one argument, "
             "`+preset=<name>`; any key given after it still wins. This page is generated at "
             "every build from the presets' files (`docs/hooks/presets.py`): each row quotes "
             "the file's header comment, which names its source; task and cell are those the "
             "preset selects (blank: those of the preset it extends). The supervised suite runs "
             "them all and tables the results (`experiments/supervised/RESULTS.md`).", "",
             "**Time here** is what a preset took on the project's machine (2 cores, shared, "
             "no GPU): the wall time and the CPU time of its runs in "
             "`experiments/supervised/runs/` (wall time grows with the load a run met; the CPU "
             "time is one idle core's), how they ended, and what the whole iteration budget "
             "costs at their pace, since a run stops early only when it meets its target; a "
             "preset with no run there is timed from its first iterations, measured at the "
             "load stated. Written by `python -m experiments.supervised.preset_times`.", ""]
    for heading, folder, how in FOLDERS:
        lines += [f"## {heading}", "", how, "",
                  "| preset | task | cell | T | time here | source and settings |",
                  "|---|---|---|---|---|---|",
                  *(row(preset) for preset in presets(REPO / folder)), ""]
    return "\n".join(lines)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated page to the site."""
    files.append(File.generated(config, PAGE, content=render()))
    return files

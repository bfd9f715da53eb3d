"""MkDocs hook: the configuration key reference, generated from the config dataclasses.

Every key of the three CLIs is a field of a dataclass, documented by the string statement that
follows it (``seed: int = 0`` then ``\"\"\"Seeds the weights ...\"\"\"``). This hook reads those
docstrings from the source with :mod:`ast` (Python keeps none of them at run time), the fields,
types and defaults from :func:`dataclasses.fields`, and writes ``reference/configuration.md``
at every build. The sections follow the registries, so a new agent (``AGENTS``), cell
(``CELLS``, plug-ins included) or task (``TASK_SCHEMAS``) gets its table without a line here;
a cell's keys are its ``__init__`` hyperparameters, documented in its docstring's ``Args:``.

A field without a description is logged as a warning, which fails ``mkdocs build --strict``.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import logging
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from omegaconf import MISSING
from rst_markup import convert

from rlmem.schema.field_docs import raw_field_docs

PAGE = "reference/configuration.md"
"""Where the generated page sits in the site."""

LOG = logging.getLogger("mkdocs.plugins.rlmem.config_reference")
"""Warnings here fail a strict build (MkDocs counts its own loggers')."""


@dataclasses.dataclass(frozen=True)
class Section:
    """One table of the reference: the keys of one config dataclass."""

    title: str
    """The heading: what selects these keys."""
    prefix: str
    """What each key is written after on the command line (``agent.``, ``memory.``)."""
    config: type
    """The config dataclass."""
    docs: Mapping[str, str]
    """Each field's description."""
    yaml_defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """Defaults that the CLI's YAML gives to fields the dataclass leaves required."""


def attribute_docstrings(cls: type) -> dict[str, str]:
    """The docstrings of ``cls``'s fields, its bases' first (a subclass's own win), as written;
    the one reader the CLIs' ``--help`` uses too
    (:func:`rlmem.schema.field_docs.raw_field_docs`)."""
    return dict(raw_field_docs(cls))


def args_section(function: Callable[..., Any]) -> dict[str, str]:
    """The ``Args:`` of a Google-style docstring: each argument's description, one string."""
    doc = inspect.getdoc(function) or ""
    match = re.search(r"^Args:\n((?:[ \t]+\S.*\n?|[ \t]*\n)+)", doc, flags=re.MULTILINE)
    if not match:
        return {}
    docs: dict[str, str] = {}
    indent: int | None = None
    name = ""
    for line in match.group(1).splitlines():
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        entry = re.match(r"(\w+)(?: \(.*?\))?:\s*(.*)", line.strip())
        if depth == indent and entry:
            name = entry.group(1)
            docs[name] = entry.group(2)
        elif depth > indent and name:
            docs[name] += " " + line.strip()
        else:
            break
    return docs


def cell_docs(cls: type) -> dict[str, str]:
    """The descriptions of a cell config's keys: the cell's ``Args:``, and ``make_cell``'s for
    the keys every cell has (``num_layers``, ``dropout``, and ``hidden_size`` if the cell's
    docstring leaves it out)."""
    from rlmem.cells import make_cell

    docs = {key: value for key, value in args_section(make_cell).items()
            if key in ("hidden_size", "num_layers", "dropout")}
    docs |= args_section(cls)
    docs["name"] = f"The registered cell (``memory={getattr(cls, 'name', '')}``)."
    return docs


def yaml_defaults(path: Path) -> dict[str, Any]:
    """The defaults a CLI's YAML gives: each group's choice in its ``defaults`` list
    (``memory: lstm``) and each top-level key but ``hydra`` (``run_dir``)."""
    loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    values: dict[str, Any] = {}
    for entry in loaded.get("defaults", []):
        if isinstance(entry, dict):
            values.update({key: value for key, value in entry.items()
                           if not key.startswith("override ")})
    values.update({key: value for key, value in loaded.items()
                   if key not in ("defaults", "hydra")})
    return values


def sections() -> list[tuple[str, str, list[Section]]]:
    """The reference's parts: each CLI (its heading, an introduction) and its sections."""
    from rlmem.agents.registry import AGENTS
    from rlmem.cells import CELLS, cell_config
    from rlmem.schema.evaluate import EvaluateConfig
    from rlmem.schema.memory import CONF_DIR
    from rlmem.schema.supervised import TASK_SCHEMAS, SupervisedConfig
    from rlmem.schema.train import TrainConfig

    memory = [Section(f"`memory={name}`", "memory.", cell_config(name), cell_docs(cls))
              for name, cls in sorted(CELLS.items())]
    return [
        ("`python -m rlmem.train`",
         "An RL run's own keys (`rlmem/schema/train.py`), then the agent's (`agent=<name>`, "
         "one package under `agents/`) and the memory's (`memory=<cell>`, below).",
         [Section("The run", "", TrainConfig, attribute_docstrings(TrainConfig),
                  yaml_defaults(CONF_DIR / "train.yaml")),
          *(Section(f"`agent={name}`", "agent.", agent.config,
                    attribute_docstrings(agent.config))
            for name, agent in sorted(AGENTS.items()))]),
        ("`python -m rlmem.supervised`",
         "A supervised run's keys (`rlmem/schema/supervised.py`), then the task's "
         "(`task=<name>`; `transfer_copy` is `copy` with the paper's `eval_seq_lens`).",
         [Section("The run", "", SupervisedConfig, attribute_docstrings(SupervisedConfig),
                  yaml_defaults(CONF_DIR / "supervised.yaml")),
          *(Section(f"`task={name}`", "task.", config, attribute_docstrings(config))
            for name, config in TASK_SCHEMAS.items())]),
        ("`python -m rlmem.evaluate`",
         "Evaluation of a trained RL run (`rlmem/schema/evaluate.py`).",
         [Section("The evaluation", "", EvaluateConfig, attribute_docstrings(EvaluateConfig),
                  yaml_defaults(CONF_DIR / "evaluate.yaml"))]),
        ("`memory=<cell>`",
         "Every registered cell's keys, from its `__init__` signature (defaults, types) and its "
         "docstring (descriptions); the same in `rlmem.train` and `rlmem.supervised`, and "
         "`+eval_memory.<key>` changes a weight-free one for evaluation only. See "
         "[Cells](../cells.md).",
         memory),
    ]


def type_name(hint: Any) -> str:
    """A field's type as a reader writes its value: ``int or null``, ``adam, rmsprop or
    sgd``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("null" if arg is type(None) else type_name(arg)
                           for arg in typing.get_args(hint))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        names = [f"`{name}`" for name in hint.__members__]
        return ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]
    if hint is Any:
        return "any"
    if origin is not None:
        return origin.__name__
    return getattr(hint, "__name__", str(hint))


def value_text(value: Any) -> str:
    """A default as YAML writes it."""
    if isinstance(value, enum.Enum):
        return value.name
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def default_text(field: dataclasses.Field[Any], section: Section) -> str:
    """A field's default: the dataclass's, else the YAML's, else *required*."""
    if field.default_factory is not dataclasses.MISSING:
        return f"`{value_text(field.default_factory())}`"
    if field.default is not dataclasses.MISSING and field.default != MISSING:
        return f"`{value_text(field.default)}`"
    if field.name in section.yaml_defaults:
        return f"`{value_text(section.yaml_defaults[field.name])}`"
    return "*required*"


def cell_text(text: str) -> str:
    """Text for one table cell: one line, roles as code, pipes escaped, and outside code
    spans a ``<`` that would open an HTML tag (``runs/<agent>/``) escaped."""
    spans = re.split(r"(`+[^`]*`+)", convert(" ".join(text.split())))
    return "".join(span if span.startswith("`") else re.sub(r"<(?=[A-Za-z/])", "&lt;", span)
                   for span in spans).replace("|", "\\|")


def rows(section: Section) -> Iterator[tuple[str, str]]:
    """Each field of ``section``: its key and its table row."""
    hints = typing.get_type_hints(section.config)
    for field in dataclasses.fields(section.config):
        description = section.docs.get(field.name, "")
        if not description.strip():
            LOG.warning("config reference: %s.%s has no description (a docstring after the "
                        "field, or an Args: entry for a cell's hyperparameter)",
                        section.config.__qualname__, field.name)
        yield field.name, (f"| `{section.prefix}{field.name}` | {type_name(hints[field.name])} "
                           f"| {default_text(field, section)} | {cell_text(description)} |")


def render() -> str:
    """The reference page, in Markdown."""
    lines = ["# Configuration keys", "",
             "Generated at every build from the config dataclasses and their field docstrings "
             "(`docs/hooks/config_reference.py`), so it lists exactly the keys the CLIs accept. "
             "A key is set on the command line as `key=value` (`agent.lr=3e-4`, "
             "`memory.hidden_size=128`); a key that is not in the config, such as an env's "
             "argument, takes a `+` (`+env_kwargs.max_steps=100`). A misspelt key or a value "
             "of the wrong type fails before any work.", ""]
    for heading, introduction, parts in sections():
        lines += [f"## {heading}", "", introduction, ""]
        for section in parts:
            lines += [f"### {section.title}", "",
                      "| key | type | default | meaning |", "|---|---|---|---|",
                      *(row for _, row in rows(section)), ""]
    return "\n".join(lines)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated page to the site."""
    files.append(File.generated(config, PAGE, content=render()))
    return files

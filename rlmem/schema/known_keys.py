"""Refusing a key that no schema knows, even one added with Hydra's ``+``.

Hydra refuses ``frams=100`` (the schema has no ``frams``) but suggests ``+frams=100``, which
it accepts: the run then trains the default ``frames`` and records ``frams: 100``. Every node
of a composed rlmem config that comes from a dataclass (the run's schema, ``agent=``,
``memory=`` whose fields come from the cell registry, ``task=``) keeps its dataclass type, so
:func:`check_known_keys` walks the config and refuses any key that is not a field of its
node's dataclass, naming the nearest valid keys (:mod:`difflib`). The free-form fields
(``env_kwargs``, ``eval_memory``: plain dicts) take any key. A preset (``+preset=...``) sets
only keys of the schema, so it passes. The three CLIs call it, before any work, through
:mod:`rlmem.schema.command_line`, and the checks of the composed configs call it too.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator

from omegaconf import DictConfig, OmegaConf

NEAREST = 3
"""How many of the nearest valid keys a refusal names."""


class UnknownKeyError(ValueError):
    """A config key that no schema knows; the message names the nearest valid ones."""


def unknown_keys(cfg: DictConfig, prefix: str = "") -> Iterator[tuple[str, list[str]]]:
    """Each key of ``cfg`` (dotted from the root) that is not a field of its node's
    dataclass, with that node's valid keys; nodes that are plain dicts take any key."""
    kind = OmegaConf.get_type(cfg)
    valid = ([field.name for field in dataclasses.fields(kind)]
             if kind is not None and dataclasses.is_dataclass(kind) else None)
    for key in cfg:
        name = str(key)
        if valid is not None and name not in valid:
            yield f"{prefix}{name}", [f"{prefix}{field}" for field in valid]
            continue
        child = cfg._get_node(name)  # the node itself: its value may be missing (???)
        if isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            yield from unknown_keys(child, f"{prefix}{name}.")


def check_known_keys(cfg: DictConfig, program: str) -> None:
    """Refuse ``cfg`` when it has a key no schema knows (the ``hydra`` node is Hydra's own).

    Raises:
        UnknownKeyError: naming every unknown key, the nearest valid keys of each, and where
            the full list is (``python -m <program> --help``).
    """
    problems = []
    for key, valid in unknown_keys(cfg):
        if key == "hydra" or key.startswith("hydra."):
            continue
        section, _, leaf = key.rpartition(".")
        where = f"{section}." if section else ""
        leaves = [name.rpartition(".")[2] for name in valid]
        nearest = [f"{where}{name}" for name in
                   difflib.get_close_matches(leaf, leaves, n=NEAREST, cutoff=0.6)]
        where = where or "top-level "
        hint = (f"did you mean {' or '.join(nearest)}?" if nearest else
                f"the {where}keys are {', '.join(valid)}")
        problems.append(f"{key} is not a key of this config ({hint})")
    if problems:
        raise UnknownKeyError(
            f"{'; '.join(problems)}. A '+' does not make a key known: it would only be "
            f"recorded, never read. Nothing was started; `python -m {program} --help` lists "
            "every key with its meaning.")

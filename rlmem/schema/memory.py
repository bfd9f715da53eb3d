"""The ``memory`` config group: the typed config of every registered cell, under its name.

Each cell's config is the dataclass :func:`~rlmem.cells.cell_config` derives from its signature,
stored in Hydra's ConfigStore as ``memory/<name>``, so ``memory=<name>`` selects it, a misspelt
key or a value of the wrong type fails when the config is composed (before any work), and a
plugin cell (:data:`rlmem.cells.ENTRY_POINT_GROUP`) is a choice like the built-in ones. There are
no YAML files to write or keep in sync, and the group lists exactly the registered cells (and
the plug-ins that failed to load: selecting one fails naming the plug-in and its error).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore

from rlmem.cells import CELLS, cell_config
from rlmem.cells.footprint import check_cell_fits
from rlmem.cells.registry import BROKEN_PLUGINS, unavailable_config

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
"""The Hydra search path shipped inside the package."""

MEMORY_GROUP = "memory"
"""The config group of the cells: ``memory=<name>``."""


def register_memory_configs() -> None:
    """Store ``memory/<name>`` for every registered cell (idempotent)."""
    store = ConfigStore.instance()
    for name in CELLS:
        store.store(group=MEMORY_GROUP, name=name, node=cell_config(name))
    for name in BROKEN_PLUGINS.keys() - CELLS.keys():  # composes, then names the plug-in
        store.store(group=MEMORY_GROUP, name=name, node=unavailable_config(name))


def cell_configs() -> list[type]:
    """The config dataclass of every registered cell."""
    return [cell_config(name) for name in CELLS]


def check_memory_config(config: Any) -> None:
    """Build the cell of a memory config on torch's ``meta`` device, which allocates nothing,
    so that every value the cell itself checks (``hidden_size=0``, an unknown option value)
    fails before a run touches its directory.

    Raises:
        ValueError: naming the cell and the value, as the cell's constructor does; or naming
            ``memory.hidden_size`` when training the cell would not fit in this machine's
            memory (:func:`~rlmem.cells.footprint.check_cell_fits`).
    """
    check_cell_fits(config)

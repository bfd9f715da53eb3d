"""Enum-valued hyperparameters of the cells: how a cell reads one, from a member or its name.

A cell's signature types such an option as its :class:`~enum.Enum`, so its Hydra config
validates the value when the config is composed (``memory.update=eq9`` fails before any work).
Configs recorded in checkpoints hold the member's name, a plain string (``enum_to_str``), so a
cell also accepts the name when it is rebuilt from one.
"""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


def enum_option(kind: type[E], value: E | str, owner: str, name: str) -> E:
    """``value`` as a member of ``kind``: a member, or the name of one.

    Raises:
        ValueError: ``value`` names no member; the message lists the valid names.
    """
    if isinstance(value, kind):
        return value
    if isinstance(value, str) and value in kind.__members__:
        return kind[value]
    raise ValueError(f"{owner}: unknown {name}={value!r}; valid: "
                     f"{', '.join(kind.__members__)}")

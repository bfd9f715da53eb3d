"""The registry of agents: ``AGENTS``, :func:`register_agent` and :func:`get_agent`.

Every package under ``agents/`` is an agent; :mod:`rlmem.agents` imports each one, and each
registers its :class:`~rlmem.agents.base.AgentConfig` here, so ``rlmem.schema`` and the CLIs
find every agent by iterating :data:`AGENTS`, never by its name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TypeVar

from rlmem.agents.base import AgentConfig

AGENTS: dict[str, type[AgentConfig]] = {}
"""Registered agents' configs, by name."""

A = TypeVar("A", bound=type[AgentConfig])


def register_agent(name: str) -> Callable[[A], A]:
    """Class decorator: add an :class:`AgentConfig` dataclass to :data:`AGENTS` as ``name``.

    Raises:
        TypeError: the class is not an :class:`AgentConfig` dataclass.
        ValueError: ``name`` is taken, or the class's ``name`` field does not default to it
            (the run directory and ``rlmem.evaluate`` read the agent from that field).
    """

    def decorator(cls: A) -> A:
        if not (dataclasses.is_dataclass(cls) and issubclass(cls, AgentConfig)):
            raise TypeError(f"agent {name!r}: {cls.__name__} must be a dataclass subclassing "
                            "AgentConfig")
        if name in AGENTS:
            raise ValueError(f"an agent named {name!r} is already registered ({AGENTS[name]})")
        default = next(field.default for field in dataclasses.fields(cls) if field.name == "name")
        if default != name:
            raise ValueError(f"agent {name!r}: {cls.__name__}.name must default to {name!r}, "
                             f"got {default!r}")
        AGENTS[name] = cls
        return cls

    return decorator


def get_agent(name: str) -> type[AgentConfig]:
    """The config class of agent ``name``; a :class:`KeyError` lists the valid names."""
    try:
        return AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; valid agents: {', '.join(sorted(AGENTS))}"
                       ) from None

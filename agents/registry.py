"""The registry of agents: ``AGENTS``, :func:`register_agent` and :func:`get_agent`.

Every package under ``agents/`` is an agent; :mod:`rlmem.agents` imports each one, and each
registers here its :class:`Agent`: its config class, how it trains and how a trained run plays.
``rlmem.schema`` and the CLIs find every agent by iterating :data:`AGENTS`, never by its name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from rlmem.agents.base import ActorLoader, AgentConfig, Trainer


class Agent(NamedTuple):
    """A registered agent."""

    config: type[AgentConfig]
    """Its config dataclass (``agent=<name>``'s keys and defaults)."""
    train: Trainer
    """Trains (or resumes) a run of it."""
    load_actor: ActorLoader
    """Turns a trained run of it into an actor (``rlmem.evaluate``)."""


AGENTS: dict[str, Agent] = {}
"""Registered agents, by name."""


def register_agent(name: str, config: type[Any], train: Trainer,
                   load_actor: ActorLoader) -> Agent:
    """Add the agent ``name`` to :data:`AGENTS`; return its entry.

    Raises:
        TypeError: ``config`` is not an :class:`AgentConfig` dataclass.
        ValueError: ``name`` is taken, or the config's ``name`` field does not default to it
            (the run directory and ``rlmem.evaluate`` read the agent from that field).
    """
    if not (dataclasses.is_dataclass(config) and issubclass(config, AgentConfig)):
        raise TypeError(f"agent {name!r}: {config.__name__} must be a dataclass subclassing "
                        "AgentConfig")
    if name in AGENTS:
        raise ValueError(f"an agent named {name!r} is already registered "
                         f"({AGENTS[name].config})")
    default = next(field.default for field in dataclasses.fields(config) if field.name == "name")
    if default != name:
        raise ValueError(f"agent {name!r}: {config.__name__}.name must default to {name!r}, "
                         f"got {default!r}")
    AGENTS[name] = Agent(config, train, load_actor)
    return AGENTS[name]


def get_agent(name: str) -> Agent:
    """The agent ``name``; a :class:`KeyError` lists the valid names."""
    try:
        return AGENTS[name]
    except KeyError:
        raise KeyError(f"unknown agent {name!r}; valid agents: {', '.join(sorted(AGENTS))}"
                       ) from None

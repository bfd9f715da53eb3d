"""The config of an RL run as it trains: frozen, typed, every derived value decided.

``python -m rlmem.train`` builds one :class:`RunConfig` from its command line, once
(:func:`rlmem.schema.train.resolve`); the checks, the trainer, the checkpoint and
``config.yaml`` all read that one object. What the run records is :meth:`RunConfig.recorded`
(:func:`dataclasses.asdict`), so ``config.yaml`` holds exactly what the trainer trained with.
Each key's meaning is documented once, on the command line's schema
(:class:`rlmem.schema.train.TrainConfig`); here are the types it has once decided. Torch-free,
and it imports nothing else of rlmem: every layer above may read it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

Agent = TypeVar("Agent")
"""The agent's typed config (:class:`~rlmem.agents.base.AgentConfig`), presets decided."""


@dataclass(frozen=True)
class RunConfig(Generic[Agent]):
    """An RL run's config, resolved and decided: a value left to be derived (``mission``,
    ``vectorization=auto``, ``memory.hidden_size``, our PPO's presets) holds what was decided
    (:mod:`rlmem.agents.derived`). The keys are :class:`~rlmem.schema.train.TrainConfig`'s,
    in its order (the run folder's, :class:`~rlmem.schema.run_folder.RunFolderConfig`, first)."""

    run_dir: str
    resume: bool
    force: bool
    env: str
    env_kwargs: dict[str, Any]
    wrappers: list[Any]
    transfer_env: str | None
    memory: dict[str, Any]
    """The cell's ``name`` and its keyword arguments (``hidden_size`` decided)."""
    agent: Agent
    seed: int
    frames: int
    stop_return: float | None
    device: str
    num_envs: int
    vectorization: str
    """``sync`` or ``async``, as decided (:func:`rlmem.envs.resolve_vectorization`)."""
    env_backend: str
    """``tensor`` or ``gymnasium``, as decided (:func:`rlmem.envs.resolve_backend`)."""
    mission: bool
    """Whether the mission text is encoded, as decided (:func:`rlmem.envs.resolved_mission`)."""
    direction: bool
    grid_encoding: str
    discrete_encoding: str
    torch_threads: int
    flush_denormal: bool
    trust_run_config: bool
    progress_bar: bool

    def recorded(self) -> dict[str, Any]:
        """What the run records (``config.yaml``, the checkpoint): :func:`dataclasses.asdict`,
        enum members as their names."""
        return dataclasses.asdict(self, dict_factory=_plain)


def _plain(items: list[tuple[str, Any]]) -> dict[str, Any]:
    """:func:`dataclasses.asdict`'s dict of one dataclass, enum members as their names (as
    OmegaConf records them)."""
    return {key: value.name if isinstance(value, Enum) else value for key, value in items}

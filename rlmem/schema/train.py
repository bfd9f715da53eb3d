"""Typed config of ``python -m rlmem.train``: the run's keys and the ``agent`` group.

``rlmem/conf/train.yaml`` starts from ``train_schema``, ``rlmem/conf/agent/<name>.yaml`` from
``agent/<name>_schema`` and ``rlmem/conf/memory/<cell>.yaml`` from ``memory/<cell>_schema``. A
misspelt key or a value of the wrong type fails when Hydra composes the config, before any env
or model is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from rlmem.agents.encoders import GRID_ENCODINGS
from rlmem.agents.ppo import PPOConfig, check_ppo_config
from rlmem.envs import VECTORIZATIONS, env_spec
from rlmem.schema.memory import register_memory_configs
from rlmem.schema.sb3 import SB3Config, check_sb3_config

AGENT_SCHEMAS: dict[str, type] = {"ppo": PPOConfig, "sb3": SB3Config}
"""The typed config of each agent (``conf/agent/<name>.yaml``); the trainers are in
:data:`rlmem.agents.trainers.TRAINERS`."""


@dataclass
class TrainConfig:
    """``python -m rlmem.train env=DoorKey-5x5 memory=relstm``."""

    env: str = "DoorKey-5x5"
    """Short env name (DoorKey-5x5, MemoryS7, ...; see rlmem.envs.ENVS) or a full gymnasium id."""
    memory: Any = MISSING
    """The memory cell and its hyperparameters (``conf/memory/``), e.g. ``memory=relstm``."""
    agent: Any = MISSING
    """The trainer and its hyperparameters (``conf/agent/``): ``ppo`` (ours) or ``sb3``."""
    seed: int = 0
    """Seeds the weights, the action sampling and the envs."""
    frames: int = 300_000
    """Total env frames (over all envs); a resumed run continues up to this number."""
    stop_return: float | None = None
    """Stop early once the mean return of the last 1000 episodes reaches this; null trains all
    ``frames`` (agent=ppo only)."""
    device: str = "auto"
    """auto, cpu, cuda or cuda:N."""
    num_envs: int = 16
    """Parallel envs."""
    vectorization: str = "sync"
    """sync (all envs in this process) or async (one process per env)."""
    mission: bool | None = None
    """Encode the mission text; null does so when the env's mission varies between episodes."""
    grid_encoding: str = "embedding"
    """How MiniGrid's grid indices enter the conv net: embedding, onehot or raw (the paper's
    rl-starter-files recipe); see rlmem.agents.encoders.ImageEncoder."""
    torch_threads: int = 1
    """torch intra-op threads; 1 is fastest for the small batched ops of a rollout."""
    run_dir: str = MISSING
    """The run directory (defaults to runs/<agent>/<env>/<memory>/seed<seed>)."""
    resume: bool = True
    """Continue from the run directory's checkpoint when there is one; false starts afresh."""
    progress_bar: bool = True
    """Show a tqdm progress bar."""


def register_train_configs() -> None:
    """Store ``train_schema``, ``agent/<name>_schema`` and the memory schemas (idempotent)."""
    register_memory_configs()
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for name, schema in AGENT_SCHEMAS.items():
        store.store(group="agent", name=f"{name}_schema", node=schema)


AGENT_CHECKS = {"ppo": check_ppo_config, "sb3": check_sb3_config}
"""Range checks of each agent's hyperparameters (types are checked by the schema)."""


def check_train_config(cfg: Any) -> None:
    """Raise a :class:`ValueError`/:class:`KeyError` naming the key when a value is invalid.

    Types are checked by the schema; this checks names and ranges a type cannot express.
    """
    env_spec(cfg.env)
    for key in ("frames", "num_envs", "torch_threads"):
        if cfg[key] <= 0:
            raise ValueError(f"{key} must be positive, got {cfg[key]}")
    if cfg.stop_return is not None and cfg.agent.name != "ppo":
        raise ValueError(f"stop_return is supported by agent=ppo only, not agent={cfg.agent.name}")
    if cfg.grid_encoding not in GRID_ENCODINGS:
        raise ValueError(f"grid_encoding={cfg.grid_encoding!r}; use one of "
                         f"{', '.join(GRID_ENCODINGS)}")
    if cfg.vectorization not in VECTORIZATIONS:
        raise ValueError(f"vectorization={cfg.vectorization!r}; use one of "
                         f"{', '.join(VECTORIZATIONS)}")
    check = AGENT_CHECKS.get(cfg.agent.name)
    if check is not None:
        check(cfg.agent)

"""Typed config of ``python -m rlmem.train``: the run's keys and the ``agent`` group.

``rlmem/conf/train.yaml`` starts from ``train_schema``, ``rlmem/conf/agent/<name>.yaml`` from
``schema/agent/<name>`` and ``rlmem/conf/memory/<cell>.yaml`` from ``schema/memory/<cell>``
(outside the selectable groups: ``agent=ppo_schema`` is no choice). A
misspelt key or a value of the wrong type fails when Hydra composes the config, before any env
or model is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from rlmem.agents.encoders import GRID_ENCODINGS
from rlmem.agents.field_encoders import DISCRETE_ENCODINGS
from rlmem.agents.heads import make_action_head
from rlmem.agents.observation import check_observation_space
from rlmem.agents.ppo import PPOConfig, check_ppo_config
from rlmem.envs import (
    VECTORIZATIONS,
    EnvOptions,
    IncompatibleEnvError,
    env_spec,
    interface_mismatch,
    parse_wrappers,
)
from rlmem.schema.memory import register_memory_configs
from rlmem.schema.sb3 import SB3Config, check_sb3_config

AGENT_SCHEMAS: dict[str, type] = {"ppo": PPOConfig, "sb3": SB3Config}
"""The typed config of each agent (``conf/agent/<name>.yaml``); the trainers are in
:data:`rlmem.agents.trainers.TRAINERS`."""


@dataclass
class TrainConfig:
    """``python -m rlmem.train env=DoorKey-5x5 memory=relstm``."""

    env: str = "DoorKey-5x5"
    """Short env name (DoorKey-5x5, MemoryS7, ...; see rlmem.envs.ENVS), any registered
    gymnasium id (CartPole-v1, MiniGrid-Empty-8x8-v0), or module:EnvId (imports module first)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of gymnasium.make, e.g. +env_kwargs.max_steps=100; the transfer and
    evaluation envs get them too."""
    wrappers: list[Any] = field(default_factory=list)
    """Gymnasium wrappers applied in order after gymnasium.make: import paths
    ("gymnasium.wrappers:TimeLimit", "my_module:MyWrapper") or {target: <path>, kwargs: {...}};
    the transfer and evaluation envs get them too. MiniGrid's observation encoding comes after
    them."""
    transfer_env: str | None = None
    """The env rlmem.evaluate env=transfer plays: any env with the same observation and action
    spaces. null: the paired target of a short name (DoorKey-5x5 -> DoorKey-16x16)."""
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
    discrete_encoding: str = "onehot"
    """How Discrete and MultiDiscrete observations are encoded: onehot or embedding; see
    rlmem.agents.field_encoders.DiscreteEncoder."""
    torch_threads: int = 1
    """torch intra-op threads; 1 is fastest for the small batched ops of a rollout."""
    run_dir: str = MISSING
    """The run directory (defaults to runs/<agent>/<env>/<memory>/seed<seed>)."""
    resume: bool = True
    """Continue from the run directory's checkpoint when there is one; false starts afresh."""
    progress_bar: bool = True
    """Show a tqdm progress bar."""


def register_train_configs() -> None:
    """Store ``train_schema``, ``schema/agent/<name>`` and the memory schemas (idempotent)."""
    register_memory_configs()
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for name, schema in AGENT_SCHEMAS.items():
        store.store(group="schema/agent", name=name, node=schema)


AGENT_CHECKS = {"ppo": check_ppo_config, "sb3": check_sb3_config}
"""Range checks of each agent's hyperparameters (types are checked by the schema)."""


def check_train_config(cfg: Any) -> None:
    """Raise a :class:`ValueError`/:class:`KeyError` naming the key when a value is invalid.

    Types are checked by the schema; this checks names and ranges a type cannot express, then
    makes one env (and one transfer env) to check that the agent can encode its observations
    and act in its action space, before any run directory is touched.
    """
    env_spec(cfg.env)
    if cfg.transfer_env is not None:
        env_spec(cfg.transfer_env)
    for key in ("frames", "num_envs", "torch_threads"):
        if cfg[key] <= 0:
            raise ValueError(f"{key} must be positive, got {cfg[key]}")
    if cfg.stop_return is not None and cfg.agent.name != "ppo":
        raise ValueError(f"stop_return is supported by agent=ppo only, not agent={cfg.agent.name}")
    if cfg.grid_encoding not in GRID_ENCODINGS:
        raise ValueError(f"grid_encoding={cfg.grid_encoding!r}; use one of "
                         f"{', '.join(GRID_ENCODINGS)}")
    if cfg.discrete_encoding not in DISCRETE_ENCODINGS:
        raise ValueError(f"discrete_encoding={cfg.discrete_encoding!r}; use one of "
                         f"{', '.join(DISCRETE_ENCODINGS)}")
    if cfg.vectorization not in VECTORIZATIONS:
        raise ValueError(f"vectorization={cfg.vectorization!r}; use one of "
                         f"{', '.join(VECTORIZATIONS)}")
    for spec in parse_wrappers(cfg.wrappers):
        spec.resolve()
    check = AGENT_CHECKS.get(cfg.agent.name)
    if check is not None:
        check(cfg.agent)
    check_envs(cfg)


def check_envs(cfg: Any) -> None:
    """Make the run's env (and its ``transfer_env``) once and check that the agent can train on
    it: an observation space it can encode, an action space it has a head for, a transfer env
    with the same spaces, and, for ``agent=sb3``, a MiniGrid env built by name alone.

    Raises:
        ValueError: naming the env and what is wrong (:class:`IncompatibleEnvError` for a
            transfer env with other spaces).
    """
    config = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(config, dict)
    options = EnvOptions.from_config(config)
    observation_space, action_space, minigrid = options.probe(cfg.env)
    try:
        check_observation_space(observation_space, cfg.grid_encoding, cfg.discrete_encoding)
        make_action_head(action_space)
    except ValueError as error:
        raise ValueError(f"env={cfg.env}: {error}") from None
    if cfg.agent.name == "sb3" and (not minigrid or cfg.env_kwargs or cfg.wrappers):
        raise ValueError(f"agent=sb3 trains MiniGrid envs made by name alone (its features "
                         f"extractor is MiniGridExtractor); env={cfg.env}"
                         f"{' is not a MiniGrid env' if not minigrid else ''}"
                         f"{' with env_kwargs/wrappers' if minigrid else ''}: use agent=ppo")
    if cfg.transfer_env is not None:
        transfer = options.probe(cfg.transfer_env)
        mismatch = interface_mismatch(transfer[0], transfer[1], observation_space, action_space)
        if mismatch:
            raise IncompatibleEnvError(
                f"transfer_env={cfg.transfer_env} {mismatch} (those of env={cfg.env}): an agent "
                "trained on env cannot act in it")

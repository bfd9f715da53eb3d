"""The pieces of a run of our PPO that act: its envs, its model and its collector, made from
the run's decided config. The trainer makes them for the run, and
:mod:`~rlmem.agents.ppo.step_footprint` for its probes before the run starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import torch
from gymnasium.vector import VectorEnv

from rlmem.agents.ppo.async_collector import AsyncRolloutCollector
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.tensor_collector import TensorRolloutCollector
from rlmem.agents.run import env_options
from rlmem.agents.run_config import RunConfig
from rlmem.envs import EnvWorkers, worker_count
from rlmem.envs.backend import TENSOR
from rlmem.envs.vectorization import ASYNC_GROUPS

Config = RunConfig[Any]
"""A run's decided config (its agent our PPO's)."""


class KernelOptions(TypedDict):
    """The model's kernels as :class:`ActorCritic` takes them: the same function and weights
    whichever they are."""

    folded_grid: bool
    compiled_lstm: bool
    blocked_products: bool
    memory_products: bool


def kernel_options(agent: Any) -> KernelOptions:
    """The decided agent section's choices of the model's kernels (its keys of the same
    names)."""
    return KernelOptions(folded_grid=bool(agent.folded_grid),
                         compiled_lstm=bool(agent.compiled_lstm),
                         blocked_products=bool(agent.blocked_products),
                         memory_products=bool(agent.memory_products))


def make_model(config: Config, envs: Any, device: torch.device) -> ActorCritic:
    """The run's actor-critic for ``envs``' spaces, on ``device``."""
    return ActorCritic(envs.single_observation_space, envs.single_action_space,
                       config.memory, grid_encoding=config.grid_encoding,
                       discrete_encoding=config.discrete_encoding,
                       shared_memory=config.agent.shared_memory is not False,
                       **kernel_options(config.agent)).to(device)


def make_envs(config: Config, device: torch.device) -> Any:
    """The run's envs: a tensor env on the run's device (``env_backend=tensor``), else those
    of its ``vectorization``."""
    if config.env_backend == TENSOR:
        return env_options(config).make_vector(config.env, config.num_envs, backend=TENSOR,
                                               device=device)
    return ENVS[config.vectorization](config)


def collector_of(config: Config) -> Callable[..., RolloutCollector]:
    """The collector of the run's envs (:data:`COLLECTORS`; a tensor env's own)."""
    return (TensorRolloutCollector if config.env_backend == TENSOR
            else COLLECTORS[config.vectorization])


def _sync_envs(config: Config) -> VectorEnv:
    return env_options(config).make_vector(config.env, config.num_envs, "sync")


def _async_envs(config: Config) -> EnvWorkers:
    return EnvWorkers(env_options(config).constructors(config.env, config.num_envs),
                      config.env, workers=worker_count(config.num_envs), groups=ASYNC_GROUPS)


ENVS: dict[str, Callable[[Config], Any]] = {"sync": _sync_envs, "async": _async_envs}
"""The envs of each resolved ``vectorization`` (:mod:`rlmem.envs.vectorization`)."""

COLLECTORS: dict[str, type[RolloutCollector]] = {
    "sync": RolloutCollector, "async": AsyncRolloutCollector}
"""The collector of each resolved ``vectorization``: ``sync`` steps every env between the
policy's steps (the reference); ``async`` overlaps the envs' steps with the policy's."""

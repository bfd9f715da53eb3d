"""Frames per second of our PPO's whole update (rollout on the tensor envs, then the PPO
update) for several shapes of the work, taking turns update by update in one process, so that
the load of a shared machine hits every shape alike."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import torch
from omegaconf import OmegaConf

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.presets import Preset, agent_values
from rlmem.agents.ppo.tensor_collector import TensorRolloutCollector
from rlmem.agents.ppo.update import PPO
from rlmem.cells import cell_config
from rlmem.envs import EnvOptions
from rlmem.envs.backend import TENSOR
from rlmem.envs.tensor import TensorVectorEnv


def update_of(env: str, memory: str, shape: Mapping[str, int]) -> Callable[[], int]:
    """One update (collect + PPO update) per call, of ``shape`` (``num_envs``,
    ``frames_per_env``, ``epochs``, ``batch_size``) over the minigrid preset's learning values,
    on the CPU; returns the frames it trained."""
    torch.manual_seed(0)
    values: dict[str, Any] = {**agent_values(Preset.minigrid), **shape}
    num_envs = values.pop("num_envs")
    envs = EnvOptions().make_vector(env, num_envs, backend=TENSOR, device="cpu")
    assert isinstance(envs, TensorVectorEnv)
    config = OmegaConf.structured(PPOConfig(**values))
    model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                        OmegaConf.structured(cell_config(memory)))
    ppo = PPO(model, config)
    collector = TensorRolloutCollector(envs, model, torch.device("cpu"), seed=0)

    def update() -> int:
        ppo.update(collector.collect(config.frames_per_env, config.recurrence))
        return int(num_envs * config.frames_per_env)

    return update


def alternating_fps(env: str, memory: str, shapes: Mapping[str, Mapping[str, int]],
                    updates: int) -> dict[str, float]:
    """Each shape's frames/s over ``updates`` timed updates, the shapes taking turns (after
    one untimed warm-up update each)."""
    torch.set_num_threads(1)
    steps = {name: update_of(env, memory, shape) for name, shape in shapes.items()}
    for step in steps.values():
        step()
    frames = dict.fromkeys(steps, 0)
    seconds = dict.fromkeys(steps, 0.0)
    for _ in range(updates):
        for name, step in steps.items():
            start = time.perf_counter()
            frames[name] += step()
            seconds[name] += time.perf_counter() - start
    return {name: frames[name] / seconds[name] for name in steps}

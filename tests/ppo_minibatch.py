"""A float64 PPO minibatch to test updates on: an actor-critic of any cell on DoorKey-5x5's
views and :data:`CHUNKS` chunks of random observations with resets, replayed from states the
model reached (``tests/agents/test_gradient_parts.py``, ``tests/agents/test_fused_adam.py``)."""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym
import torch
from omegaconf import OmegaConf
from torch import Tensor

from rlmem.agents.minigrid_encoders import GRID_VOCABULARY
from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.rollout import ChunkBatch
from rlmem.cells import cell_config
from rlmem.envs import make_env

RECURRENCE = 8


def minibatch_config(normalize_advantage: bool, **values: Any) -> Any:
    """The PPO config of these minibatches (chunks of :data:`RECURRENCE`), with ``values``."""
    return OmegaConf.structured(PPOConfig(
        recurrence=RECURRENCE, batch_size=48, epochs=1, entropy_coef=0.01,
        normalize_advantage=normalize_advantage, **values))


CHUNKS = 6
"""Chunks of the minibatch: 4 parts of them are 2, 2, 1, 1 (unequal weights)."""


@functools.cache
def spaces() -> tuple[gym.spaces.Dict, int]:
    env = make_env("DoorKey-5x5")
    assert isinstance(env.action_space, gym.spaces.Discrete)
    spaces = env.observation_space, int(env.action_space.n)
    env.close()
    assert isinstance(spaces[0], gym.spaces.Dict)
    return spaces[0], spaces[1]


@functools.cache
def rollout_batch(name: str) -> tuple[ActorCritic, ChunkBatch]:
    """A float64 model of ``name`` and a minibatch of :data:`CHUNKS` chunks of random
    DoorKey-5x5 views, an episode starting inside most chunks, each chunk
    replayed from a state the model reached on other observations (not the initial one)."""
    observation_space, actions = spaces()
    assert list(observation_space.spaces) == ["image"]
    torch.manual_seed(0)
    memory = OmegaConf.structured(cell_config(name))
    memory.hidden_size = 16
    model = ActorCritic(observation_space, actions, memory).double()

    def observations(steps: int) -> dict[str, Tensor]:
        """MiniGrid views of random (object, colour, state) indices."""
        image = torch.stack([torch.randint(0, size, (steps, CHUNKS, 7, 7))
                             for size in GRID_VOCABULARY], dim=-1)
        return {"image": image.to(torch.uint8)}

    resets = torch.rand(RECURRENCE, CHUNKS) < 0.2
    resets[0, 0] = True  # a chunk that starts an episode
    with torch.no_grad():
        start = model(observations(3), model.initial_state(CHUNKS),
                      torch.zeros(3, CHUNKS, dtype=torch.bool)).state
        seen = observations(RECURRENCE)
        out = model(seen, start, resets)
        actions_taken = torch.distributions.Categorical(logits=out.action_params).sample()
        old_log_probs = torch.log_softmax(out.action_params, -1).gather(
            -1, actions_taken.unsqueeze(-1)).squeeze(-1) + 0.1 * torch.randn(RECURRENCE, CHUNKS)
        old_values = out.value + 0.1 * torch.randn(RECURRENCE, CHUNKS)
    advantages = torch.randn(RECURRENCE, CHUNKS, dtype=torch.float64)
    return model, ChunkBatch(seen, resets, start, actions_taken, old_log_probs.double(),
                             old_values.double(), advantages, advantages + old_values)


def converted(batch: ChunkBatch, dtype: torch.dtype | None = None,
              device: torch.device | str | None = None) -> ChunkBatch:
    """``batch`` with every tensor (the start states' too) on ``device`` and the floating-point
    ones in ``dtype`` (None: as they are)."""
    def convert(value: Tensor) -> Tensor:
        return value.to(device=device, dtype=dtype if value.is_floating_point() else None)

    return ChunkBatch(
        {key: convert(value) for key, value in batch.observations.items()},
        convert(batch.resets), batch.start_state._make(convert(value) for value in
                                                      batch.start_state),
        convert(batch.actions), *(convert(value) for value in (
            batch.old_log_probs, batch.old_values, batch.advantages, batch.returns)))

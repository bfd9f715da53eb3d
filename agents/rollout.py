"""Collecting rollouts from vectorised envs with a recurrent policy, one batched step at a time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv
from torch import Tensor

from rlmem.agents.heads import sample_actions
from rlmem.agents.model import ActorCritic
from rlmem.agents.observation import observation_to_tensors, stack_observations

__all__ = ["Rollout", "RolloutCollector", "observation_to_tensors", "sample_actions",
           "select_state", "stack_states"]


def stack_states(states: list[Any]) -> Any:
    """Stack a list of memory states (NamedTuples) field by field on a new leading dim."""
    return type(states[0])(*(torch.stack(fields) for fields in zip(*states, strict=True)))


def select_state(state: Any, index: Tensor) -> Any:
    """The batch items ``index`` of every field of a memory state (fields may be of any dtype)."""
    return type(state)(*(value[index] for value in state))


@dataclass
class Rollout:
    """``T`` steps of ``B`` envs, time-major, on the training device.

    ``resets[t, b]`` marks ``observations[t, b]`` as the first observation of an episode, so the
    memory of ``b`` (and only of ``b``) is re-initialised before it. ``chunk_states[k]`` is the
    memory state before step ``k * recurrence``, as it was during the rollout (no gradient).
    """

    observations: dict[str, Tensor]
    """Each field ``(T, B, ...)``."""
    resets: Tensor
    """``(T, B)`` bool."""
    actions: Tensor
    """``(T, B, *head.action_shape)``, as the head stores them (long indices, or a Gaussian's
    unclipped sample)."""
    log_probs: Tensor
    """Log-probability of the action under the rollout policy, ``(T, B)``."""
    values: Tensor
    """``V(o_t)`` under the rollout policy, ``(T, B)``."""
    rewards: Tensor
    """``(T, B)``."""
    terminated: Tensor
    """``(T, B)`` bool: the episode ended at ``t``."""
    truncated: Tensor
    """``(T, B)`` bool: the episode was cut by a time limit at ``t``."""
    final_values: Tensor
    """``V`` of the last observation of an episode truncated at ``t`` (else 0), ``(T, B)``."""
    last_values: Tensor
    """``V`` of the observation after step ``T - 1``, ``(B,)``."""
    chunk_states: Any
    """Memory state before every ``recurrence``-th step; each field ``(T / recurrence, B, ...)``."""
    episode_returns: list[float] = field(default_factory=list)
    """Returns of the episodes that ended during the rollout."""
    episode_lengths: list[int] = field(default_factory=list)
    """Lengths of the episodes that ended during the rollout."""


class RolloutCollector:
    """Steps ``envs`` with ``model``, carrying observations, memory and episode stats across
    rollouts.

    Every step is one batched forward over all envs (``T = 1`` through the cell) under
    ``torch.no_grad``; the rollout stays on ``device``.

    Args:
        envs: a vector env with ``SAME_STEP`` autoreset (:func:`rlmem.envs.make_vector_env`).
        model: the actor-critic.
        device: where the model and the rollout live.
        seed: seeds the envs' first reset.
    """

    def __init__(self, envs: VectorEnv, model: ActorCritic, device: torch.device,
                 seed: int) -> None:
        self.envs = envs
        self.model = model
        self.device = device
        self.num_envs = envs.num_envs
        observation, _ = envs.reset(seed=seed)
        self.observation = observation_to_tensors(observation, device)
        self.state = model.initial_state(self.num_envs, device=device)
        self.resets = torch.ones(self.num_envs, dtype=torch.bool, device=device)
        self._episode_return = np.zeros(self.num_envs)
        self._episode_length = np.zeros(self.num_envs, dtype=np.int64)

    @torch.no_grad()
    def collect(self, steps: int, recurrence: int) -> Rollout:
        """Run ``steps`` steps of every env.

        Args:
            steps: rollout length ``T`` (frames per env).
            recurrence: the BPTT chunk length; ``steps`` must be a multiple of it.
        """
        if steps % recurrence:
            raise ValueError(f"steps={steps} must be a multiple of recurrence={recurrence}")
        device, batch = self.device, self.num_envs
        observations = {key: torch.empty((steps, *value.shape), dtype=value.dtype, device=device)
                        for key, value in self.observation.items()}
        resets = torch.empty(steps, batch, dtype=torch.bool, device=device)
        head = self.model.action
        actions = torch.empty(steps, batch, *head.action_shape, dtype=head.action_dtype,
                              device=device)
        log_probs, values, rewards, final_values = (
            torch.zeros(steps, batch, device=device) for _ in range(4))
        terminated = torch.empty(steps, batch, dtype=torch.bool, device=device)
        truncated = torch.empty(steps, batch, dtype=torch.bool, device=device)
        chunk_states = []
        episode_returns: list[float] = []
        episode_lengths: list[int] = []

        for t in range(steps):
            if t % recurrence == 0:
                chunk_states.append(self.state)
            for key, value in self.observation.items():
                observations[key][t] = value
            resets[t] = self.resets
            out = self.model(_add_time(self.observation), self.state, self.resets.unsqueeze(0))
            action, log_prob = head.sample(out.action_params[0])
            actions[t], log_probs[t], values[t] = action, log_prob, out.value[0]

            next_observation, reward, term, trunc, info = self.envs.step(head.env_action(action))
            rewards[t] = torch.as_tensor(reward, dtype=torch.float32, device=device)
            terminated[t] = torch.as_tensor(term, device=device)
            truncated[t] = torch.as_tensor(trunc & ~term, device=device)
            cut = np.flatnonzero(trunc & ~term)
            if cut.size:
                # The value of where a truncated episode stopped, seen with its own memory.
                final_values[t, cut] = self._final_values(info, cut, out.state)

            self._episode_return += reward
            self._episode_length += 1
            done = term | trunc
            for index in np.flatnonzero(done):
                episode_returns.append(float(self._episode_return[index]))
                episode_lengths.append(int(self._episode_length[index]))
            self._episode_return[done] = 0.0
            self._episode_length[done] = 0

            self.observation = observation_to_tensors(next_observation, device)
            self.state = out.state
            self.resets = torch.as_tensor(done, device=device)

        last = self.model(_add_time(self.observation), self.state, self.resets.unsqueeze(0))
        return Rollout(observations, resets, actions, log_probs, values, rewards, terminated,
                       truncated, final_values, last.value[0], stack_states(chunk_states),
                       episode_returns, episode_lengths)

    def _final_values(self, info: dict[str, Any], cut: np.ndarray, state: Any) -> Tensor:
        observation = stack_observations(list(info["final_obs"][cut]), self.device)
        index = torch.as_tensor(cut, device=self.device)
        no_reset = torch.zeros(1, len(cut), dtype=torch.bool, device=self.device)
        return self.model(_add_time(observation), select_state(state, index), no_reset).value[0]


def _add_time(observation: dict[str, Tensor]) -> dict[str, Tensor]:
    return {key: value.unsqueeze(0) for key, value in observation.items()}

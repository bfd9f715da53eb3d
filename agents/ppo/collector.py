"""Collecting rollouts from vectorised envs with a recurrent policy, one batched step at a time."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.vector import VectorEnv
from torch import Tensor

from rlmem.agents.env_output import EnvOutputCheck, env_name
from rlmem.agents.episodes import EpisodeTracker, FinishedEpisode
from rlmem.agents.ppo.model import ActorCritic, PolicyOutput
from rlmem.agents.ppo.observation import add_time, observation_to_tensors, stack_observations
from rlmem.agents.ppo.rollout import Rollout, select_state, stack_states
from rlmem.cells import State


class RolloutCollector:
    """Steps ``envs`` with ``model``, carrying observations, memory and episode stats across
    rollouts.

    Every step is one batched forward over all envs (``T = 1`` through the cell) under
    ``torch.inference_mode``: nothing of acting is recorded for autograd, whose bookkeeping
    under ``torch.no_grad`` weighed on every small op of a step at 16 envs. The
    rollout's tensors are made outside it and written in place, so that the update can save
    them for its backward (an inference-mode tensor cannot be); the memory carried from step to
    step stays an inference-mode tensor until the rollout stacks its chunk states. The rollout
    stays on ``device``. What the envs return is checked first
    (:class:`~rlmem.agents.env_output.EnvOutputCheck`): a NaN observation or an infinite
    reward is reported naming the env and the frame, not as the policy's divergence.

    Args:
        envs: a vector env with ``SAME_STEP`` autoreset (:func:`rlmem.envs.make_vector_env`).
        model: the actor-critic.
        device: where the model and the rollout live.
        seed: seeds the envs' first reset.
        name: the env as the run names it (default: its gymnasium id), for the messages.
        frames: the run's frame count before the first step (a resumed run's), for the
            messages.

    Raises:
        EnvOutputError: the envs' first observations are not finite or do not fit their space.
    """

    def __init__(self, envs: VectorEnv, model: ActorCritic, device: torch.device,
                 seed: int, *, name: str | None = None, frames: int = 0) -> None:
        self.envs = envs
        self.model = model
        self.device = device
        self.num_envs = envs.num_envs
        self.frames = frames
        self.observation = self._reset(seed, name)
        self.state = model.initial_state(self.num_envs, device=device)
        self.resets = torch.ones(self.num_envs, dtype=torch.bool, device=device)
        self.episodes = EpisodeTracker(self.num_envs)

    def _reset(self, seed: int, name: str | None) -> dict[str, Tensor]:
        """The envs' first observations (checked), as tensors on the device."""
        self.check = EnvOutputCheck(name or env_name(self.envs),
                                    self.envs.single_observation_space, self.num_envs,
                                    "Nothing of it was used for an update.")
        observation = self.check.reset(self.envs, seed, f"frame {self.frames} (the first reset)")
        return observation_to_tensors(observation, self.device)

    @torch.no_grad()
    def collect(self, steps: int, recurrence: int) -> Rollout:
        """Run ``steps`` steps of every env.

        Args:
            steps: rollout length ``T`` (frames per env).
            recurrence: the BPTT chunk length the rollout is laid out in; ``steps`` must be a
                multiple of it.
        """
        if steps % recurrence:
            raise ValueError(f"steps={steps} must be a multiple of recurrence={recurrence}")
        rollout = self._allocate(steps, recurrence)
        chunk_states = []
        finished: list[FinishedEpisode] = []
        with torch.inference_mode():
            for t in range(steps):
                if t % recurrence == 0:
                    chunk_states.append(self.state)
                finished += self._step(rollout, t)
            last = self.model(add_time(self.observation), self.state, self.resets.unsqueeze(0))
            rollout.last_values.copy_(last.value[0])
        rollout.chunk_states = stack_states(chunk_states)  # outside it: tensors the update saves
        rollout.episode_returns = [episode.episode_return for episode in finished]
        rollout.episode_lengths = [episode.length for episode in finished]
        return rollout

    def _allocate(self, steps: int, recurrence: int) -> Rollout:
        """An empty rollout of ``steps`` steps (its last values and chunk states are set when
        it is full)."""
        device, batch, head = self.device, self.num_envs, self.model.action
        log_probs, values, rewards, final_values = (
            torch.zeros(steps, batch, device=device) for _ in range(4))
        return Rollout(
            observations={key: torch.empty((steps, *value.shape), dtype=value.dtype,
                                           device=device)
                          for key, value in self.observation.items()},
            resets=torch.empty(steps, batch, dtype=torch.bool, device=device),
            actions=torch.empty(steps, batch, *head.action_shape, dtype=head.action_dtype,
                                device=device),
            log_probs=log_probs, values=values, rewards=rewards,
            terminated=torch.empty(steps, batch, dtype=torch.bool, device=device),
            truncated=torch.empty(steps, batch, dtype=torch.bool, device=device),
            final_values=final_values, last_values=torch.zeros(batch, device=device),
            recurrence=recurrence, chunk_states=None)

    def _step(self, rollout: Rollout, t: int) -> list[FinishedEpisode]:
        """Act in every env once, writing step ``t`` of ``rollout``; return the episodes that
        ended."""
        device, head = self.device, self.model.action
        out, action = self._sample(rollout, t)
        next_observation, reward, term, trunc, info = self.check.step(
            self.envs, head.env_action(action), f"frame {self.frames}")
        rollout.rewards[t] = torch.as_tensor(reward, dtype=torch.float32, device=device)
        rollout.terminated[t] = torch.as_tensor(term, device=device)
        rollout.truncated[t] = torch.as_tensor(trunc & ~term, device=device)
        cut = np.flatnonzero(trunc & ~term)
        if cut.size:
            # The value of where a truncated episode stopped, seen with its own memory.
            rollout.final_values[t, cut] = self._final_values(info, cut, out.state)
        self.observation = observation_to_tensors(next_observation, device)
        self.state = out.state
        self.resets = torch.as_tensor(term | trunc, device=device)
        return self.episodes.step(reward, term | trunc)

    def _sample(self, rollout: Rollout, t: int) -> tuple[PolicyOutput, Tensor]:
        """Sample every env's action at step ``t`` from the current observations and memory,
        writing what the update needs into ``rollout``; the model's output and the actions."""
        for key, value in self.observation.items():
            rollout.observations[key][t] = value
        rollout.resets[t] = self.resets
        out = self.model(add_time(self.observation), self.state, self.resets.unsqueeze(0))
        action, log_prob = self.model.action.sample(out.action_params[0])
        rollout.actions[t], rollout.log_probs[t], rollout.values[t] = (action, log_prob,
                                                                       out.value[0])
        self.frames += self.num_envs
        return out, action

    def _final_values(self, info: dict[str, Any], cut: np.ndarray, state: State) -> Tensor:
        observation = stack_observations(list(info["final_obs"][cut]), self.device)
        index = torch.as_tensor(cut, device=self.device)
        no_reset = torch.zeros(1, len(cut), dtype=torch.bool, device=self.device)
        return self.model(add_time(observation), select_state(state, index), no_reset).value[0]

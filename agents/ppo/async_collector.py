"""Collecting rollouts while the envs step in worker processes: the policy acts for one group of
envs while the workers step the other (``vectorization=async``).

The data stay exactly on-policy: one set of parameters for the whole rollout (the update comes
after it), and every env steps ``frames_per_env`` times per rollout, as with
:class:`~rlmem.agents.ppo.collector.RolloutCollector`. What differs from it is only the batching:
the policy acts on each group apart (two calls of ``B / 2`` envs a step instead of one of
``B``), so action sampling draws its random numbers in another order and the floating-point
results are not those of ``vectorization=sync``; a run is still deterministic for its seed,
because the order of every computation in this process is fixed, whatever the workers' timing.

One step of the pipeline, for groups 0 and 1 (the workers step a group between its
``step_async`` and its ``step_wait``)::

    wait(0) -> act(0) -> step_async(0) -> wait(1) -> act(1) -> step_async(1) -> wait(0) ...
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from rlmem.agents.env_output import EnvOutputCheck
from rlmem.agents.episodes import EpisodeTracker, FinishedEpisode
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.observation import observation_arrays, observation_to_tensors
from rlmem.agents.ppo.rollout import Rollout, select_state, stack_states
from rlmem.cells import State
from rlmem.envs.env_workers import EnvWorkers


def _cat_states(states: list[State]) -> State:
    """Memory states of consecutive groups of envs joined on the batch dim."""
    return states[0]._make(torch.cat(fields) for fields in zip(*states, strict=True))


class AsyncRolloutCollector(RolloutCollector):
    """Steps :class:`~rlmem.envs.env_workers.EnvWorkers` with ``model``, one group of envs at a
    time (module docstring); the rollout it returns is laid out as
    :class:`~rlmem.agents.ppo.collector.RolloutCollector`'s.

    Args:
        envs: the envs in their worker processes.
        model: the actor-critic.
        device: where the model and the rollout live.
        seed: seeds the envs' first reset.
        name: the env as the run names it, for the messages.
        frames: the run's frame count before the first step, for the messages.

    Raises:
        EnvOutputError: the envs' first observations are not finite.
        EnvWorkerError: an env raised in its worker, or a worker died.
    """

    def __init__(self, envs: EnvWorkers, model: ActorCritic, device: torch.device, seed: int,
                 *, name: str | None = None, frames: int = 0) -> None:
        self.envs_workers = envs
        self.model = model
        self.device = device
        self.num_envs = envs.num_envs
        self.frames = frames
        self.check = EnvOutputCheck(name or envs.name, envs.single_observation_space,
                                    self.num_envs, "Nothing of it was used for an update.")
        observation, _ = envs.reset(seed=seed)
        self.check.check(observation, None, f"frame {frames} (the first reset)")
        self.observation = {key: value.clone() for key, value in
                            observation_to_tensors(observation, device).items()}
        self.groups = envs.groups
        self.states = [model.initial_state(part.stop - part.start, device=device)
                       for part in self.groups]
        self.resets = torch.ones(self.num_envs, dtype=torch.bool, device=device)
        self.trackers = [EpisodeTracker(part.stop - part.start) for part in self.groups]

    @property
    def state(self) -> State:  # type: ignore[override]
        """The memory state of every env (the groups' joined)."""
        return _cat_states(self.states)

    @torch.no_grad()
    def collect(self, steps: int, recurrence: int) -> Rollout:
        """Run ``steps`` steps of every env (see :meth:`RolloutCollector.collect`)."""
        if steps % recurrence:
            raise ValueError(f"steps={steps} must be a multiple of recurrence={recurrence}")
        rollout = self._allocate(steps, recurrence)
        groups = range(len(self.groups))
        chunk_states: list[list[State]] = []
        finished: list[FinishedEpisode] = []
        outputs: list[Any] = [None] * len(self.groups)
        for group in groups:
            outputs[group] = self._act(rollout, 0, group, chunk_states)
        for t in range(steps):
            self.frames += self.num_envs
            for group in groups:
                finished += self._receive(rollout, t, group, outputs[group])
                if t + 1 < steps:
                    outputs[group] = self._act(rollout, t + 1, group, chunk_states)
        last = [self.model({key: value[self.groups[group]].unsqueeze(0)
                            for key, value in self.observation.items()}, self.states[group],
                           self.resets[self.groups[group]].unsqueeze(0)).value[0]
                for group in groups]
        rollout.last_values = torch.cat(last)
        rollout.chunk_states = stack_states([_cat_states(states) for states in chunk_states])
        rollout.episode_returns = [episode.episode_return for episode in finished]
        rollout.episode_lengths = [episode.length for episode in finished]
        return rollout

    def _act(self, rollout: Rollout, t: int, group: int,
             chunk_states: list[list[State]]) -> Any:
        """Record the group's observation at ``t``, act on it and start the workers stepping
        the group; the model's output (for :meth:`_receive`)."""
        part = self.groups[group]
        if t % rollout.recurrence == 0:
            if group == 0:
                chunk_states.append([])
            chunk_states[-1].append(self.states[group])
        observation = {}
        for key, value in self.observation.items():
            slot = rollout.observations[key][t, part]
            slot.copy_(value[part])
            observation[key] = slot.unsqueeze(0)
        resets = self.resets[part]
        rollout.resets[t, part] = resets
        out = self.model(observation, self.states[group], resets.unsqueeze(0))
        action, log_prob = self.model.action.sample(out.action_params[0])
        rollout.actions[t, part], rollout.log_probs[t, part] = action, log_prob
        rollout.values[t, part] = out.value[0]
        self.envs_workers.step_async(group, self.model.action.env_action(action),
                                     f"frame {self.frames + self.num_envs}")
        return out

    def _receive(self, rollout: Rollout, t: int, group: int, out: Any) -> list[FinishedEpisode]:
        """Wait for the group's step ``t``, write its outcome into ``rollout``, and keep its
        next observation and memory."""
        part, device = self.groups[group], self.device
        at = f"frame {self.frames}"
        result = self.envs_workers.step_wait(group, at)
        self.check.check(result.observation, result.reward, at, first_env=part.start)
        term, trunc = result.terminated.copy(), result.truncated.copy()
        reward = result.reward.copy()
        rollout.rewards[t, part] = torch.as_tensor(reward, dtype=torch.float32, device=device)
        rollout.terminated[t, part] = torch.as_tensor(term, device=device)
        cut_mask = trunc & ~term
        rollout.truncated[t, part] = torch.as_tensor(cut_mask, device=device)
        cut = np.flatnonzero(cut_mask)
        if cut.size:
            # The value of where a truncated episode stopped, seen with its own memory.
            final = observation_to_tensors(
                self.envs_workers.final_observations(cut + part.start), device)
            index = torch.as_tensor(cut, device=device)
            no_reset = torch.zeros(1, len(cut), dtype=torch.bool, device=device)
            rollout.final_values[t, part.start + cut] = self.model(
                {key: value.unsqueeze(0) for key, value in final.items()},
                select_state(out.state, index), no_reset).value[0]
        for key, value in observation_arrays(result.observation).items():
            self.observation[key][part] = torch.as_tensor(value, device=device)
        self.states[group] = out.state
        self.resets[part] = torch.as_tensor(term | trunc, device=device)
        return self.trackers[group].step(reward, term | trunc)

"""Collecting rollouts from a tensor env (``env_backend=tensor``): the envs' observations,
rewards and ends stay torch tensors on the env's device from step to step, with no NumPy round
trip (:mod:`rlmem.envs.tensor`).

The layout of the rollout, the memory carried across rollouts and the episode statistics are
those of :class:`~rlmem.agents.ppo.collector.RolloutCollector`; only how a step reaches the
envs differs. The envs' outputs are not checked for NaNs as a gymnasium env's are
(:class:`~rlmem.agents.env_output.EnvOutputCheck`): the tensor envs are rlmem's own, proved
equal to their originals, and checking would wait for the device every step. Nothing is read
back to the host per step: the episodes that ended are read once per rollout, and the values of
the observations where episodes were truncated (for GAE's bootstrap) are computed once per
rollout, in one batch, from each step's final observations and memory, kept until then. On the
CPU, where reading which envs were truncated costs no synchronisation, a step keeps only those
envs' memory: the rest is freed as the rollout goes (MemLSTM's memory is tens of MB a step at
256 envs, and kept whole it was neither recycled nor cheap to stack).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlmem.agents.episodes import FinishedEpisode
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.heads import ActionHead, CategoricalHead, MultiCategoricalHead
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.observation import add_time
from rlmem.agents.ppo.rollout import Rollout, cat_states, select_state, stack_states
from rlmem.cells import State
from rlmem.envs.spaces import OBSERVATION_FIELD
from rlmem.envs.tensor import TensorObservation, TensorVectorEnv


def tensor_action(head: ActionHead, actions: Tensor) -> Tensor:
    """Sampled actions as the batch a tensor env takes, on the model's device: a categorical's
    shifted by the space's ``start`` (a Box's go through :meth:`ActionHead.env_action`, which
    clips them on the host)."""
    if isinstance(head, CategoricalHead):
        return actions + head.start if head.start else actions
    if isinstance(head, MultiCategoricalHead):
        return (actions + head.start).reshape(actions.shape[0], *head.space_shape)
    return torch.as_tensor(head.env_action(actions), device=actions.device)


class TensorRolloutCollector(RolloutCollector):
    """:class:`~rlmem.agents.ppo.collector.RolloutCollector` for a tensor env (the module's
    docstring); its arguments are the same, ``envs`` a
    :class:`~rlmem.envs.tensor.TensorVectorEnv`."""

    def __init__(self, envs: TensorVectorEnv, model: ActorCritic, device: torch.device,
                 seed: int, *, name: str | None = None, frames: int = 0) -> None:
        self.env_device = envs.device
        super().__init__(envs, model, device, seed, name=name, frames=frames)
        self.returns = torch.zeros(self.num_envs, dtype=torch.float64, device=device)
        self.lengths = torch.zeros(self.num_envs, dtype=torch.int64, device=device)
        self.ended: list[tuple[Tensor, Tensor, Tensor]] = []
        """Per step of the rollout: which envs ended, with their returns and lengths."""
        self.finals: list[tuple[TensorObservation, State]] = []
        """Per step of the rollout: every env's final observation (``info["final_obs"]``) and
        the memory after the step (:meth:`_kept_state`), for the values of truncated
        episodes."""
        self.keeps_truncated_rows = self.device.type == "cpu"
        """Whether a step keeps only its truncated envs' memory (the module docstring): where
        reading which envs those are costs no synchronisation."""

    def _reset(self, seed: int, name: str | None) -> dict[str, Tensor]:
        observation, _ = self.envs.reset(seed=seed)
        return self._fields(observation, self.device)

    @torch.no_grad()
    def collect(self, steps: int, recurrence: int) -> Rollout:
        self.ended, self.finals = [], []
        rollout = super().collect(steps, recurrence)
        self._truncated_values(rollout)
        self.finals = []
        finished = self._finished()
        rollout.episode_returns = [episode.episode_return for episode in finished]
        rollout.episode_lengths = [episode.length for episode in finished]
        return rollout

    def _step(self, rollout: Rollout, t: int) -> list[FinishedEpisode]:
        """Act in every env once, writing step ``t`` of ``rollout``; the ended episodes are
        kept on the device and read by :meth:`collect`."""
        out, action = self._sample(rollout, t)
        # the envs' state outside the collector's inference mode: a tensor made in it could
        # not be written in place outside (an env's reset, a test's edit)
        with torch.inference_mode(False), torch.no_grad():
            observation, reward, term, trunc, info = self.envs.step(
                tensor_action(self.model.action, action).to(self.env_device))
        reward, term, trunc = (value.to(self.device) for value in (reward, term, trunc))
        rollout.rewards[t] = reward.to(torch.float32)
        rollout.terminated[t] = term
        rollout.truncated[t] = trunc & ~term
        self.finals.append((info["final_obs"], self._kept_state(out.state, rollout.truncated[t])))
        self.observation = self._fields(observation, self.device)
        self.state = out.state
        self.resets = term | trunc
        self._count(reward, self.resets)
        return []

    def _kept_state(self, state: State, truncated: Tensor) -> State:
        """What :meth:`_truncated_values` needs of a step's memory: on the CPU the rows of the
        envs truncated there, in order (:attr:`keeps_truncated_rows`); elsewhere all of it."""
        if not self.keeps_truncated_rows:
            return state
        return select_state(state, truncated.nonzero().squeeze(1))

    def _count(self, reward: Tensor, done: Tensor) -> None:
        """Add one step to every env's episode, keeping those ``done`` ends."""
        self.returns += reward
        self.lengths += 1
        self.ended.append((done, self.returns.clone(), self.lengths.clone()))
        self.returns = torch.where(done, 0.0, self.returns)
        self.lengths = torch.where(done, 0, self.lengths)

    def _finished(self) -> list[FinishedEpisode]:
        """The episodes that ended in this rollout, in the order of
        :class:`~rlmem.agents.episodes.EpisodeTracker` (by step, then by env)."""
        if not self.ended:
            return []
        done, returns, lengths = (torch.stack(parts).cpu()
                                  for parts in zip(*self.ended, strict=True))
        steps, envs = done.nonzero(as_tuple=True)
        return [FinishedEpisode(int(env), float(episode_return), int(length))
                for env, episode_return, length in zip(
                    envs.tolist(), returns[steps, envs].tolist(), lengths[steps, envs].tolist(),
                    strict=True)]

    def _truncated_values(self, rollout: Rollout) -> None:
        """Write ``rollout.final_values``: the value of where each truncated episode stopped,
        seen with its own memory, for every truncation of the rollout in one batch (one read
        of which envs were truncated per rollout)."""
        steps, rows = rollout.truncated.nonzero(as_tuple=True)
        if not len(steps):
            return
        finals = [self._fields(final, self.device) for final, _ in self.finals]
        observation = {key: torch.stack([fields[key] for fields in finals])[steps, rows]
                       for key in finals[0]}
        kept = [state for _, state in self.finals]
        if self.keeps_truncated_rows:  # each step's truncated rows, in the order of nonzero's
            state = cat_states(kept)
        else:
            states = stack_states(kept)
            state = states._make(value[steps, rows] for value in states)
        no_reset = torch.zeros(1, len(steps), dtype=torch.bool, device=self.device)
        rollout.final_values[steps, rows] = self.model(add_time(observation), state,
                                                       no_reset).value[0]

    @staticmethod
    def _fields(observation: TensorObservation, device: torch.device) -> dict[str, Tensor]:
        """A tensor env's observation by field on ``device``, as
        :func:`~rlmem.agents.ppo.observation.observation_to_tensors` gives a gymnasium env's (a
        Tuple's is refused: flatten it first)."""
        if isinstance(observation, tuple):
            raise ValueError("a Tuple observation cannot enter the agent; flatten it "
                             "(wrappers=[gymnasium.wrappers:FlattenObservation])")
        fields = observation if isinstance(observation, dict) else {
            OBSERVATION_FIELD: observation}
        return {key: value.to(device) for key, value in fields.items()}


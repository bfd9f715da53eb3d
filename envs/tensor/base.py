"""The protocol every tensor env follows: :class:`TensorVectorEnv`.

A tensor env is ``num_envs`` copies of one env whose whole state is tensors of shape
``(num_envs, ...)`` on one device (CPU or GPU). Each :meth:`~TensorVectorEnv.step` moves every
copy in a fixed number of tensor operations, with no Python loop over the envs (nor over the
cells of a grid), and returns tensors on that device. (On the CPU, MiniGrid's step and view
are instead one call each of rlmem's compiled loops, a pass over the envs in C++, bit for bit
the tensor operations' result: at 16 envs those operations cost far more to call than to run;
``rlmem.envs.tensor.minigrid.env``.)

It is a :class:`gymnasium.vector.VectorEnv` with the stream rlmem's gymnasium path gives
(:func:`rlmem.envs.make_vector_env`, ``AutoresetMode.SAME_STEP``): a step that ends an episode
(``terminated | truncated``) returns the reward and ends of that last step together with the
*first* observation of the env's next episode, and the finished episode's last observation in
``info["final_obs"]``. Unlike gymnasium's object array of per-env observations,
``info["final_obs"]`` here is the whole batch (a tensor, or a dict of tensors, like the
observation) and ``info["_final_obs"]`` says which envs it belongs to; the other envs' rows are
their current observations.

Seeds. ``reset(seed=s)`` gives env ``i`` the seed ``s + i`` (as gymnasium's vector envs do),
``reset(seed=[s0, s1, ...])`` one seed each, ``reset()`` seeds drawn from torch's default
generator. An env's episodes are numbered from 0 at its seeding, and episode ``e`` of an env
seeded ``s`` is generated from draws that depend on ``(s, e)`` only
(:func:`rlmem.envs.tensor.random.uniform_draws`): the same on every device and in every batch,
however many envs and whichever other envs reset when.

Spaces. ``single_observation_space`` and ``single_action_space`` equal those of the env as
rlmem's gymnasium backend makes it (MiniGrid's through
:class:`rlmem.envs.MiniGridObservation`), so an agent built for one backend runs on the other.

Equality with the original. Each tensor env has a classmethod ``from_reference(envs,
device=...)`` that copies the current state of given original envs (already reset), one per
copy, so that the tests can step both with the same actions and compare every observation,
reward and end (generation after an auto-reset differs draw for draw, see above, and is
compared in distribution).

A subclass implements three methods:

- :meth:`~TensorVectorEnv._generate` starts a new episode in the envs of a mask, from their
  draws;
- :meth:`~TensorVectorEnv._transition` applies one action per env and returns the rewards and
  the ends;
- :meth:`~TensorVectorEnv._observe` returns every env's current observation;

and may override :meth:`~TensorVectorEnv._reset_rows` (an auto-reset on the CPU, with the
observations around it) to observe less.

Shapes:
    - observation: ``(N, *single_observation_space.shape)`` per field
    - actions: ``(N, *single_action_space.shape)``
    - reward: ``(N,)`` float64 (gymnasium's vector envs' dtype; the originals' rewards are
      Python floats, so equal bit for bit); terminated, truncated: ``(N,)`` bool
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space
from torch import Tensor

from rlmem.envs.tensor.random import MASK32, episode_draws, fold_seed, lowbias32

TensorObservation: TypeAlias = Tensor | dict[str, Tensor] | tuple[Tensor, ...]
"""A batch of observations: one tensor, or one per field of a Dict space, or one per part of a
Tuple space (POPGym's Autoencode)."""

StepResult: TypeAlias = tuple[TensorObservation, Tensor, Tensor, Tensor, dict[str, Any]]
"""What :meth:`TensorVectorEnv.step` returns: observation, reward, terminated, truncated,
info."""


class TensorVectorEnv(VectorEnv[TensorObservation, Tensor, Tensor], ABC):
    """``num_envs`` copies of an env as tensors on ``device`` (the module's docstring).

    Args:
        num_envs: copies.
        single_observation_space: one copy's observation space (the gymnasium backend's).
        single_action_space: one copy's action space (the gymnasium backend's).
        draws_per_episode: uniform draws :meth:`_generate` takes per new episode.
        device: where the state lives and the step runs.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}  # noqa: RUF012
    """Gymnasium's vector-env metadata: the autoreset mode of rlmem's gymnasium path."""

    def __init__(self, num_envs: int, single_observation_space: spaces.Space[Any],
                 single_action_space: spaces.Space[Any], draws_per_episode: int,
                 device: torch.device | str = "cpu") -> None:
        if num_envs <= 0:
            raise ValueError(f"num_envs must be positive, got {num_envs}")
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, num_envs)
        self.action_space = batch_space(single_action_space, num_envs)
        self.draws_per_episode = draws_per_episode
        self.seeds = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        """Each env's folded seed (:func:`rlmem.envs.tensor.random.fold_seed`)."""
        self.seed_hashes = lowbias32(self.seeds)
        """``lowbias32`` of each seed, the start of its draws."""
        self.masked_resets = self.device.type != "cpu"
        """Whether a step resets the envs that ended by computing a new episode for every env
        and selecting (True, the default on a GPU, where asking which envs ended would wait
        for the device), or by indexing the ended ones (False, the CPU's default). The two
        give the same envs; tests compare them on the CPU."""
        self.episodes = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        """Each env's episode number since it was seeded."""

    # --- what a subclass implements ---------------------------------------------------------

    @abstractmethod
    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        """Start a new episode in the envs where ``envs`` is True, from their ``draws``; leave
        the others as they are.

        Shapes: ``envs`` ``(N,)`` bool; ``draws`` ``(N, draws_per_episode)`` float64 in
        ``[0, 1)``.
        """

    @abstractmethod
    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Apply ``actions``, one per env; return ``(reward, terminated, truncated)``.

        Shapes: ``actions`` ``(N, *single_action_space.shape)`` -> ``(N,)`` float64, bool,
        bool.
        """

    @abstractmethod
    def _observe(self) -> TensorObservation:
        """Every env's current observation, new tensors (not views of the state)."""

    # --- the vector env ---------------------------------------------------------------------

    def reset(self, *, seed: int | Sequence[int] | None = None,
              options: dict[str, Any] | None = None) -> tuple[TensorObservation, dict[str, Any]]:
        """Seed every env (the module's docstring) and start its episode 0.

        Raises:
            ValueError: ``seed`` is a sequence whose length is not ``num_envs``, or holds a
                negative seed; ``options`` is given (no tensor env takes any).
        """
        if options:
            raise ValueError(f"{type(self).__name__}.reset takes no options, got {options}")
        self.seeds = fold_seed(self._seed_tensor(seed))
        self.seed_hashes = lowbias32(self.seeds)
        self.episodes = torch.zeros_like(self.episodes)
        everywhere = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._generate(everywhere, self._draws())
        return self._observe(), {}

    def step(self, actions: Any) -> StepResult:
        """One step of every env, auto-resetting those that end (``SAME_STEP``: the module's
        docstring)."""
        actions = torch.as_tensor(np.asarray(actions) if not isinstance(actions, Tensor)
                                  else actions, device=self.device)
        reward, terminated, truncated = self._transition(actions)
        done = terminated | truncated
        if self.masked_resets:
            final = self._observe()
            self.episodes = self.episodes + done.to(torch.int64)
            self._generate(done, self._draws())
            observation = self._observe()
        else:
            rows = done.nonzero().squeeze(1)
            if rows.numel():
                self.episodes[rows] += 1
                ended, observation = self._reset_rows(done, rows)
                final = _with_rows(observation, rows, ended)
            else:  # most steps end no episode
                final = observation = self._observe()
        return observation, reward, terminated, truncated, {"final_obs": final,
                                                            "_final_obs": done}

    def _reset_rows(self, done: Tensor, rows: Tensor
                    ) -> tuple[TensorObservation, TensorObservation]:
        """Start new episodes in the envs ``rows`` (where ``done``), returning their last
        observations before (``(k, ...)``) and every env's observation after (``(N, ...)``).

        By default the whole batch is observed before and after; a subclass may observe
        less (:class:`rlmem.envs.tensor.minigrid.MiniGridTensorEnv` observes the ``rows``'
        old state and the new batch in one go).
        """
        ended = _rows_of(self._observe(), rows)
        self._generate(done, self._draws())
        return ended, self._observe()

    def _draws(self) -> Tensor:
        """The draws of every env's current episode (``(N, draws_per_episode)``)."""
        return episode_draws(self.seed_hashes, self.episodes, self.draws_per_episode)

    def _seed_tensor(self, seed: int | Sequence[int] | None) -> Tensor:
        """One non-negative int64 seed per env from ``reset``'s ``seed``."""
        if seed is None:
            return torch.randint(0, MASK32 + 1, (self.num_envs,), dtype=torch.int64,
                                 device=self.device)
        if isinstance(seed, int):
            seeds = [seed + index for index in range(self.num_envs)]
        else:
            seeds = [int(value) for value in seed]
        if len(seeds) != self.num_envs or min(seeds) < 0:
            raise ValueError(f"seed={seed!r}: give one non-negative int (env i gets seed + i) "
                             f"or {self.num_envs} non-negative ints, one per env")
        return torch.tensor(seeds, dtype=torch.int64, device=self.device)


def _rows_of(observation: TensorObservation, rows: Tensor) -> TensorObservation:
    """The ``rows`` of a batch of observations, field by field (part by part)."""
    if isinstance(observation, Tensor):
        return observation[rows]
    if isinstance(observation, tuple):
        return tuple(value[rows] for value in observation)
    return {key: value[rows] for key, value in observation.items()}


def _with_rows(observation: TensorObservation, rows: Tensor,
               replacement: TensorObservation) -> TensorObservation:
    """A copy of ``observation`` whose ``rows`` are ``replacement``'s."""
    if isinstance(observation, Tensor):
        assert isinstance(replacement, Tensor)
        return observation.index_copy(0, rows, replacement)
    if isinstance(observation, tuple):
        assert isinstance(replacement, tuple)
        return tuple(value.index_copy(0, rows, part)
                     for value, part in zip(observation, replacement, strict=True))
    assert isinstance(replacement, dict)
    return {key: value.index_copy(0, rows, replacement[key])
            for key, value in observation.items()}

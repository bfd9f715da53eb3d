"""The wrappers rlmem's runs put on POPGym's envs, for tensor envs: the same observations, as
tensors.

- :class:`TensorPreviousAction`: :class:`rlmem.envs.previous_action.PreviousAction`, the
  previous action and a first-step flag beside the observation (POPGym's baselines see them);
- :class:`TensorFlattenObservation`: gymnasium's ``FlattenObservation``, which the POPGym suite
  puts on Autoencode, whose ``Tuple`` observation the encoders do not take
  (``experiments/popgym/suite.py``).

:data:`TENSOR_WRAPPERS` maps each gymnasium wrapper to its tensor version, so that a run's
``wrappers`` (:class:`rlmem.envs.wrappers.WrapperSpec`) can be applied to a tensor env.

A wrapper is itself a tensor env (:class:`~rlmem.envs.tensor.base.TensorVectorEnv`): it steps
and generates through the env it wraps (its three methods) and changes only what is observed,
so the auto-reset of the base class stays the one place that orders a step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Union

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.previous_action import (
    ACTION_KEY,
    ACTION_SPACES,
    FIRST_KEY,
    PreviousAction,
    _zero,
)
from rlmem.envs.spaces import OBSERVATION_FIELD
from rlmem.envs.tensor.base import TensorObservation, TensorVectorEnv
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv
from rlmem.envs.wrappers import WrapperItem, parse_wrappers

Wrapped = Union[PopgymTensorEnv, "TensorWrapper"]
"""What a wrapper wraps: a tensor POPGym env, or another wrapper of one."""


class TensorWrapper(TensorVectorEnv):
    """A tensor env seen through a change of its observations (module docstring).

    Args:
        env: the env wrapped.
        observation_space: one copy's observation space as the wrapper shows it.
    """

    def __init__(self, env: Wrapped, observation_space: spaces.Space[Any]) -> None:
        super().__init__(env.num_envs, observation_space, env.single_action_space,
                         env.draws_per_episode, env.device)
        self.env = env
        self.seeds, self.episodes = env.seeds, env.episodes

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        self.env._generate(envs, draws)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.env._transition(actions)

    def load_reference(self, envs: Sequence[gym.Env[Any, Any]], rows: Iterable[int]) -> None:
        """Copy the state of POPGym's ``envs`` into the copies ``rows`` of the env wrapped
        (:meth:`PopgymTensorEnv.load_reference`)."""
        self.env.load_reference(envs, rows)

    def observe(self) -> TensorObservation:
        """Every copy's current observation, as the wrapper shows it."""
        return self._observe()


class TensorPreviousAction(TensorWrapper):
    """:class:`~rlmem.envs.previous_action.PreviousAction` for a tensor env: the observation
    becomes a Dict of the env's observation (under ``observation`` unless it is a Dict), the
    action taken before it (``previous_action``; the action space's zero at an episode's first
    observation) and ``first`` (1 at an episode's first observation).

    Shapes: ``previous_action`` ``(N, *action shape)`` in the action space's dtype, ``first``
    ``(N,)`` int64.
    """

    def __init__(self, env: Wrapped) -> None:
        action_space, inner = env.single_action_space, env.single_observation_space
        if not isinstance(action_space, ACTION_SPACES):
            raise ValueError(f"TensorPreviousAction: cannot add actions of {action_space} to "
                             "an observation")
        if isinstance(inner, spaces.Tuple):
            raise ValueError("TensorPreviousAction: the observation is a Tuple, which a Dict "
                             "field of a tensor observation cannot hold; flatten it first "
                             "(TensorFlattenObservation, as gymnasium's FlattenObservation)")
        fields = dict(inner.spaces) if isinstance(inner, spaces.Dict) else {
            OBSERVATION_FIELD: inner}
        super().__init__(env, spaces.Dict(
            {**fields, ACTION_KEY: action_space, FIRST_KEY: spaces.Discrete(2)}))
        none = torch.as_tensor(_zero(action_space), device=self.device)
        self.none = none
        self.previous = none.expand(self.num_envs, *none.shape).clone()
        self.first = torch.ones(self.num_envs, dtype=torch.int64, device=self.device)

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        super()._generate(envs, draws)
        fresh = envs.view(-1, *([1] * self.none.dim()))
        self.previous = torch.where(fresh, self.none, self.previous)
        self.first = torch.where(envs, 1, self.first)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        self.previous = actions.to(self.none.dtype).reshape(self.previous.shape).clone()
        self.first = torch.zeros_like(self.first)
        return super()._transition(actions)

    def _observe(self) -> dict[str, Tensor]:
        inner = self.env._observe()
        assert not isinstance(inner, tuple)  # refused in __init__
        fields = dict(inner) if isinstance(inner, dict) else {OBSERVATION_FIELD: inner}
        return {**fields, ACTION_KEY: self.previous.clone(), FIRST_KEY: self.first.clone()}


class TensorFlattenObservation(TensorWrapper):
    """Gymnasium's ``FlattenObservation`` for a tensor env: each observation flattened as
    :func:`gymnasium.spaces.flatten` does (a Discrete value one-hot, in the space's dtype; a
    Tuple's parts flattened and joined in order).

    Raises:
        ValueError: the observation space holds other spaces than Box, Discrete,
            MultiDiscrete and Tuples of them.
    """

    def __init__(self, env: Wrapped) -> None:
        inner = env.single_observation_space
        _check_flattenable(inner)
        super().__init__(env, spaces.flatten_space(inner))
        self.dtype = getattr(torch, np.dtype(self.single_observation_space.dtype).name)

    def _observe(self) -> Tensor:
        flat = flatten(self.env.single_observation_space, self.env._observe())
        return flat.to(self.dtype)


def _check_flattenable(space: spaces.Space[Any]) -> None:
    if isinstance(space, spaces.Tuple):
        for part in space.spaces:
            _check_flattenable(part)
    elif not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete)):
        raise ValueError(f"TensorFlattenObservation: cannot flatten {space}; it flattens Box, "
                         "Discrete, MultiDiscrete and Tuples of them")


def flatten(space: spaces.Space[Any], observation: Any) -> Tensor:
    """A batch of observations of ``space`` flattened as :func:`gymnasium.spaces.flatten`
    flattens one.

    Shapes: ``(N, ...)`` (a tuple of them for a Tuple) -> ``(N, flatdim(space))``.
    """
    if isinstance(space, spaces.Tuple):
        return torch.cat([flatten(part, value) for part, value in
                          zip(space.spaces, observation, strict=True)], dim=1)
    if isinstance(space, spaces.Discrete):
        return torch.nn.functional.one_hot(observation - int(space.start), int(space.n))
    if isinstance(space, spaces.MultiDiscrete):
        values = (observation - torch.as_tensor(space.start, device=observation.device)).flatten(1)
        return torch.cat([torch.nn.functional.one_hot(values[:, index], int(size))
                          for index, size in enumerate(space.nvec.reshape(-1))], dim=1)
    assert isinstance(space, spaces.Box)
    return observation.flatten(1)


TENSOR_WRAPPERS: dict[type[gym.Wrapper[Any, Any, Any, Any]], Callable[[Wrapped], TensorWrapper]] = {
    PreviousAction: TensorPreviousAction,
    gym.wrappers.FlattenObservation: TensorFlattenObservation,
}
"""The tensor version of each gymnasium wrapper a run may name for a POPGym env."""


def apply_tensor_wrappers(env: Wrapped, wrappers: Iterable[WrapperItem]) -> Wrapped:
    """``env`` wrapped by the tensor version of each of a run's ``wrappers``, the first
    innermost (as :func:`rlmem.envs.wrappers.apply_wrappers` wraps a gymnasium env).

    Raises:
        ValueError: a wrapper has no tensor version (:data:`TENSOR_WRAPPERS`) or takes
            keyword arguments; the message names those that have one.
    """
    for spec in parse_wrappers(wrappers):
        tensor_wrapper = TENSOR_WRAPPERS.get(spec.resolve())
        if tensor_wrapper is None or spec.kwargs:
            known = ", ".join(f"{wrapper.__module__}:{wrapper.__name__}"
                              for wrapper in TENSOR_WRAPPERS)
            raise ValueError(
                f"wrapper {spec.target!r}{' with kwargs' if spec.kwargs else ''} has no tensor "
                f"version: a tensor env takes only {known}, without kwargs. Use "
                "env_backend=gymnasium to wrap the env in it.")
        env = tensor_wrapper(env)
    return env

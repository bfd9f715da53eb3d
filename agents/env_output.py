"""Checking what an env returns before an agent learns from it or acts on it.

A NaN observation would otherwise surface as "the policy diverged", an infinite reward as "PPO
loss is nan", and an observation of the wrong shape as numpy's "Output array is the wrong
shape" from inside gymnasium's vector env: each blames the agent or names nothing. An
:class:`EnvOutputCheck` names the env, the step (the run's frame count) and the env index
instead, before the value reaches the model.

Per step it costs one vectorised :func:`numpy.isfinite` over the batch of rewards and one over
each floating field of the observation (integer observations, such as MiniGrid's grid, cannot
be NaN); shapes cost nothing in the common case, because the vector env already stacks every
env's observation into arrays of its space's shape and raises when one does not fit: that
failure is what :meth:`EnvOutputCheck.step` turns into a message.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv

from rlmem.envs import Observation, describe_space


class EnvOutputError(ValueError):
    """An env returned an observation or a reward that no agent can learn from or act on."""


def env_name(envs: VectorEnv) -> str:
    """The gymnasium id of a vector env's envs (sync and async vector envs both have
    ``get_attr``; the base class declares none)."""
    get_attr = getattr(envs, "get_attr", None)
    specs = get_attr("spec") if callable(get_attr) else ()
    spec = specs[0] if specs else None
    return str(spec.id) if spec is not None else "(an env without a gymnasium id)"


class EnvOutputCheck:
    """Checks each batch of observations and rewards that ``num_envs`` copies of an env return.

    Args:
        name: the env, as the user knows it (``DoorKey-5x5``), for the messages.
        observation_space: the space of one env's observations.
        num_envs: envs in the batch.
        consequence: what the failure leaves, a sentence for the messages (``Nothing of it
            was used for an update.``).
    """

    def __init__(self, name: str, observation_space: spaces.Space[Any], num_envs: int,
                 consequence: str) -> None:
        self.name = name
        self.space = observation_space
        self.num_envs = num_envs
        self.consequence = consequence
        # Only floating Box fields can hold NaN or an infinity; worked out once.
        self.floating: list[str | None] = [
            key for key, space in _fields(observation_space)
            if isinstance(space, spaces.Box) and np.issubdtype(space.dtype, np.floating)]

    def check(self, observation: Observation, reward: np.ndarray | None, at: str,
              first_env: int = 0) -> None:
        """Raise :class:`EnvOutputError` unless every floating observation field and every
        reward of the batch is finite; ``at`` names the step (``frame 96``), and the batch's
        envs are numbered from ``first_env`` (a group of the envs, stepped apart)."""
        for key in self.floating:
            values = np.asarray(observation[key] if isinstance(observation, Mapping)
                                and key is not None else observation)
            if not np.isfinite(values).all():
                self._bad_observation(values, key, at, first_env)
        if reward is not None and not np.isfinite(reward).all():
            self._bad_reward(np.asarray(reward).reshape(-1), at, first_env)

    def reset(self, envs: VectorEnv, seed: int, at: str) -> Observation:
        """``envs.reset(seed=seed)``'s observation, checked (:meth:`check`)."""
        try:
            observation, _ = envs.reset(seed=seed)
        except ValueError as error:
            raise self._unstackable(envs, error, at) from error
        self.check(observation, None, at)
        return observation

    def step(self, envs: VectorEnv, action: Any,
             at: str) -> tuple[Observation, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """``envs.step(action)``, its observation and reward checked (:meth:`check`)."""
        try:
            observation, reward, terminated, truncated, info = envs.step(action)
        except ValueError as error:
            raise self._unstackable(envs, error, at) from error
        self.check(observation, reward, at)
        return observation, reward, terminated, truncated, info

    # --- the messages ----------------------------------------------------------------------

    def _bad_observation(self, values: np.ndarray, key: str | None, at: str,
                         first_env: int = 0) -> None:
        bad = [int(i) for i in np.argwhere(~np.isfinite(values))[0]]
        where = [f"field {key!r}"] if key is not None else []
        if len(bad) > 1:
            where.append(f"element {bad[1:]}")
        self._non_finite(f"an observation holding {float(values[tuple(bad)])}"
                         + (f" ({', '.join(where)})" if where else ""), first_env + bad[0], at)

    def _bad_reward(self, values: np.ndarray, at: str, first_env: int = 0) -> None:
        env = first_env + int(np.flatnonzero(~np.isfinite(values))[0])
        self._non_finite(f"a reward of {float(values[env])}", env, at)

    def _non_finite(self, shown: str, env: int, at: str) -> None:
        raise EnvOutputError(
            f"env {self.name} returned {shown} at {at}, in env {env} of {self.num_envs}. An "
            f"agent can neither learn from nor act on NaN or infinite values. "
            f"{self.consequence} Fix the env (or add a wrapper that keeps its values finite), "
            "then run the same command again.")

    def _unstackable(self, envs: VectorEnv, error: ValueError, at: str) -> EnvOutputError:
        """The vector env raised ``error`` while stepping: when it came from stacking the envs'
        observations, name the env whose observation does not have its space's shape (where
        the vector env shows them); else the env itself refused the step."""
        if not _from_stacking(error):
            return EnvOutputError(
                f"env {self.name} raised ValueError at {at}: {error}. {self.consequence} Fix "
                "the env, then run the same command again.")
        # SyncVectorEnv keeps each env's last observation; no public API exposes them.
        found = next((mismatch for index, observation
                      in enumerate(getattr(envs, "_env_obs", None) or ())
                      if (mismatch := self._misfit(index, observation))), "")
        return EnvOutputError(
            f"env {self.name} returned an observation that does not fit its observation space "
            f"({describe_space(self.space)}) at {at}{found or f' (gymnasium: {error})'}. "
            f"{self.consequence} Fix the env's observations (or its observation_space), then "
            "run the same command again.")

    def _misfit(self, index: int, observation: Any) -> str:
        """How env ``index``'s ``observation`` misses its space's shape ("" if it does not)."""
        for key, space in _fields(self.space):
            value = observation if key is None else (
                observation.get(key) if isinstance(observation, Mapping) else None)
            shape = np.shape(value) if value is not None else None
            if isinstance(space, spaces.Box) and shape != space.shape:
                field = "" if key is None else f" (field {key!r})"
                return (f": env {index} of {self.num_envs} returned an observation{field} of "
                        f"shape {list(shape) if shape is not None else 'none'} where its space "
                        f"has shape {list(space.shape)}")
        return ""


def _from_stacking(error: BaseException) -> bool:
    """Whether ``error`` was raised while gymnasium stacked the envs' observations (its
    ``concatenate``), rather than by an env."""
    return any(Path(frame.filename).parent.name == "utils" and "gymnasium" in frame.filename
               and frame.name.startswith(("concatenate", "_concatenate"))
               for frame in traceback.extract_tb(error.__traceback__))


def _fields(space: spaces.Space[Any]) -> list[tuple[str | None, spaces.Space[Any]]]:
    """The top-level fields of an observation space: ``(key, space)`` for a Dict, else
    ``(None, space)``."""
    if isinstance(space, spaces.Dict):
        return list(space.spaces.items())
    return [(None, space)]

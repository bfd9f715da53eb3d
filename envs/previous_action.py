"""The previous action in each observation, as POPGym's baselines give it (Morad et al., 2023).

In a POMDP the agent's own past actions are part of its history: POPGym's Battleship observes
only whether the last shot hit, never where it was fired, and its memory can place the hit
only if it sees the action. POPGym's paper counts the previous action as part of the
observation ("Strictly speaking, the agent actions are also required to guarantee
convergence", a footnote of its introduction), and its baselines wrap every env in
``PreviousAction`` and ``Antialias``. Those wrappers take only a bare POPGym env, not the one
``gymnasium.make`` returns, and gymnasium has none, so this is the same idea for any env:

- ``previous_action``: the action taken before this observation, in the env's action space;
  at the first observation of an episode, which follows no action, the space's zero (action 0,
  a zero vector);
- ``first``: 1 at the first observation of an episode, else 0 (POPGym's ``Antialias``), so that
  the zero at the start is not read as an action taken.

Both join the env's own observation as fields of a Dict: a Dict observation gains the two keys,
any other is kept under ``observation`` (:data:`rlmem.envs.spaces.OBSERVATION_FIELD`).
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlmem.envs.spaces import OBSERVATION_FIELD

ACTION_KEY = "previous_action"
"""The field holding the previous action."""
FIRST_KEY = "first"
"""The field that is 1 at the first observation of an episode."""

ACTION_SPACES = (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Box)
"""The action spaces whose actions can join an observation."""


class PreviousAction(gym.Wrapper[dict[str, Any], Any, Any, Any]):
    """Adds the previous action and a first-step flag to each observation (module docstring).

    Args:
        env: any env whose action space is one of :data:`ACTION_SPACES`.

    Raises:
        ValueError: the action space is another kind, or the observation is a Dict that
            already has a ``previous_action`` or ``first`` key.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        action_space = env.action_space
        if not isinstance(action_space, ACTION_SPACES):
            raise ValueError(f"PreviousAction: cannot add actions of {action_space} to an "
                             "observation; it adds Discrete, MultiDiscrete, MultiBinary or Box "
                             "actions")
        inner = env.observation_space
        # Decided once, not per step: are the env's observations Dicts, or kept under
        # OBSERVATION_FIELD?
        self._fields_given = isinstance(inner, spaces.Dict)
        fields = (dict(inner.spaces) if isinstance(inner, spaces.Dict)
                  else {OBSERVATION_FIELD: inner})
        taken = sorted({ACTION_KEY, FIRST_KEY} & set(fields))
        if self._fields_given and taken:
            raise ValueError(f"PreviousAction: the observation already has {taken}")
        self.observation_space = spaces.Dict(
            {**fields, ACTION_KEY: action_space, FIRST_KEY: spaces.Discrete(2)})
        self._none = _zero(action_space)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        observation, info = self.env.reset(seed=seed, options=options)
        return self._with(observation, self._none, first=True), info

    def step(self, action: Any) -> tuple[dict[str, Any], SupportsFloat, bool, bool,
                                         dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        taken = np.asarray(action, dtype=self._none.dtype).reshape(self._none.shape)
        return self._with(observation, taken, first=False), reward, terminated, truncated, info

    def _with(self, observation: Any, action: np.ndarray, *, first: bool) -> dict[str, Any]:
        fields = dict(observation) if self._fields_given else {OBSERVATION_FIELD: observation}
        return {**fields, ACTION_KEY: action.copy(), FIRST_KEY: np.int64(first)}


def _zero(space: spaces.Space[Any]) -> np.ndarray:
    """The action that stands for none: the space's zero (for a Discrete with a ``start``, its
    first action), in the space's dtype and shape."""
    dtype = np.dtype(space.dtype if space.dtype is not None else np.int64)
    if isinstance(space, spaces.Discrete):
        return np.asarray(space.start, dtype=dtype)
    if isinstance(space, spaces.MultiDiscrete):
        return np.asarray(space.start, dtype=dtype).copy()
    if isinstance(space, spaces.Box):
        # Zero where the box allows it, else the nearest bound.
        return np.clip(np.zeros(space.shape, dtype=dtype), space.low, space.high).astype(dtype)
    return np.zeros(space.shape or (), dtype=dtype)  # MultiBinary

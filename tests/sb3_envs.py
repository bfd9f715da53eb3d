"""Small environments for the sb3 adapter tests (after sb3-contrib's own RecurrentPPO tests)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control import CartPoleEnv


class CartPoleNoVelEnv(CartPoleEnv):
    """CartPole observing positions only: the velocities must be inferred, which needs memory."""

    def __init__(self) -> None:
        super().__init__()
        high = np.array([self.x_threshold * 2, self.theta_threshold_radians * 2],
                        dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)

    @staticmethod
    def _positions(full: np.ndarray) -> np.ndarray:
        return np.array([full[0], full[2]], dtype=np.float32)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        full, info = super().reset(seed=seed, options=options)
        return self._positions(full), info

    def step(self, action: int | np.ndarray) -> tuple[np.ndarray, float, bool, bool,
                                                      dict[str, Any]]:
        full, reward, terminated, truncated, info = super().step(action)
        return self._positions(full), reward, terminated, truncated, info


class CueRecallEnv(gym.Env):
    """A cue (±1) shown at the first step only, ``delay`` blank steps, then a query: reward 1
    for the action matching the cue. Without memory the success rate is 1/2.

    Observation ``[cue, query]``; action 0 or 1; episodes last ``delay + 2`` steps.
    """

    def __init__(self, delay: int = 4) -> None:
        self.delay = delay
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._cue = 0
        self._t = 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(2))
        self._t = 0
        return np.array([2.0 * self._cue - 1.0, 0.0], dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        if self._t <= self.delay:
            return np.zeros(2, dtype=np.float32), 0.0, False, False, {}
        if self._t == self.delay + 1:
            return np.array([0.0, 1.0], dtype=np.float32), 0.0, False, False, {}
        success = int(action) == self._cue
        return (np.zeros(2, dtype=np.float32), float(success), True, False,
                {"is_success": success})


class ToDictWrapper(gym.ObservationWrapper):
    """Wraps the observation as ``{"obs": obs, "flag": 1.0}``, to exercise Dict observations."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = spaces.Dict({
            "obs": env.observation_space,
            "flag": spaces.Box(0.0, 1.0, (1,), dtype=np.float32)})

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        return {"obs": observation, "flag": np.ones(1, dtype=np.float32)}

"""Envs that return what no agent can use, at a known step: a NaN observation, an infinite
reward, an observation of the wrong shape. Importable by the CLIs in a subprocess
(``env=faulty_envs:RlmemTest-NaNObservation-v0``) when ``tests/`` is on ``PYTHONPATH``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

FAULT_STEP = 3
"""Each env's faulty output comes at this step of every episode (a PPO run's frame
``FAULT_STEP * num_envs``)."""

NAN_OBSERVATION = "RlmemTest-NaNObservation-v0"
INFINITE_REWARD = "RlmemTest-InfiniteReward-v0"
WRONG_SHAPE = "RlmemTest-WrongShape-v0"


class FaultyEnv(gym.Env):
    """Observes a ``Box(4,)`` position that moves with the action; at step :data:`FAULT_STEP`
    returns what ``fault`` says (``nan``, ``inf`` or ``shape``). Episodes last 8 steps.

    Args:
        fault: which output goes wrong.
    """

    LENGTH = 8

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.observation_space = spaces.Box(-10.0, 10.0, (4,), np.float32)
        self.action_space = spaces.Discrete(2)
        self._t = 0

    def _observation(self) -> np.ndarray:
        observation = np.full(4, self._t / self.LENGTH, dtype=np.float32)
        if self._t == FAULT_STEP and self.fault == "nan":
            observation[2] = np.nan
        if self._t == FAULT_STEP and self.fault == "shape":
            return observation[:3]
        return observation

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._observation(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        reward = np.inf if self._t == FAULT_STEP and self.fault == "inf" else float(action)
        return self._observation(), reward, self._t >= self.LENGTH, False, {}


for _id, _fault in ((NAN_OBSERVATION, "nan"), (INFINITE_REWARD, "inf"), (WRONG_SHAPE, "shape")):
    if _id not in gym.registry:
        gym.register(_id, entry_point="faulty_envs:FaultyEnv", kwargs={"fault": _fault})

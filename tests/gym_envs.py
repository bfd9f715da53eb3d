"""Small gymnasium envs and wrappers for the tests of our PPO beyond MiniGrid.

Importable by the CLIs in a subprocess (``wrappers=[gym_envs:MaskVelocity]``,
``env=gym_envs:RlmemTest-DictCue-v0``) when ``tests/`` is on ``PYTHONPATH``.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

DICT_CUE = "RlmemTest-DictCue-v0"
"""A Dict observation (Box, Discrete, MultiDiscrete) and MultiDiscrete actions."""

TEXT_OBSERVATION = "RlmemTest-Text-v0"
"""Observes a Text space: nothing the agent can encode."""


class MaskVelocity(gym.ObservationWrapper):
    """CartPole observing its positions only (cart position, pole angle): the velocities must
    be inferred from successive observations, which needs memory.

    Args:
        env: a CartPole env.
        keep: the indices of the observation that stay.
    """

    def __init__(self, env: gym.Env, keep: tuple[int, ...] = (0, 2)) -> None:
        super().__init__(env)
        self.keep = list(keep)
        space = env.observation_space
        assert isinstance(space, spaces.Box)
        self.observation_space = spaces.Box(space.low[self.keep], space.high[self.keep],
                                            dtype=np.float32)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.keep].astype(np.float32)


class ScaleReward(gym.RewardWrapper):
    """Rewards times ``scale``: CartPole's returns (up to 500) become values PPO's clipped value
    loss can follow (the critic moves by at most ``agent.clip`` per update)."""

    def __init__(self, env: gym.Env, scale: float = 0.01) -> None:
        super().__init__(env)
        self.scale = scale

    def reward(self, reward: SupportsFloat) -> float:
        return float(reward) * self.scale


class DictCueEnv(gym.Env):
    """A cue in ``{0, 1, 2}`` shown at the first step; the agent is rewarded for naming it with
    the first component of its MultiDiscrete action at every step. Episodes last 8 steps.

    Observation: ``{"cue": Discrete(4)`` (3 = hidden), ``"position": Box(2,)``,
    ``"grid": MultiDiscrete([3, 3])}``; action ``MultiDiscrete([3, 2])``.
    """

    LENGTH = 8

    def __init__(self) -> None:
        self.observation_space = spaces.Dict({
            "cue": spaces.Discrete(4),
            "position": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "grid": spaces.MultiDiscrete([3, 3]),
        })
        self.action_space = spaces.MultiDiscrete([3, 2])
        self._cue = 0
        self._t = 0

    def _observation(self) -> dict[str, Any]:
        return {"cue": self._cue if self._t == 0 else 3,
                "position": np.array([self._t / self.LENGTH, 0.0], dtype=np.float32),
                "grid": np.array([self._t % 3, self._cue], dtype=np.int64)}

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self._cue = int(self.np_random.integers(3))
        self._t = 0
        return self._observation(), {}

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, bool,
                                                dict[str, Any]]:
        assert self.action_space.contains(np.asarray(action)), action
        reward = float(int(action[0]) == self._cue)
        self._t += 1
        return self._observation(), reward, self._t >= self.LENGTH, False, {}


class TextEnv(gym.Env):
    """Observes a string: a space the agent cannot encode."""

    def __init__(self) -> None:
        self.observation_space = spaces.Text(8)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        return "a", {}

    def step(self, action: int) -> tuple[str, float, bool, bool, dict[str, Any]]:
        return "a", 0.0, True, False, {}


for _id, _entry in ((DICT_CUE, "gym_envs:DictCueEnv"), (TEXT_OBSERVATION, "gym_envs:TextEnv")):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry)

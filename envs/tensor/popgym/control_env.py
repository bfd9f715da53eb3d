"""What POPGym's two control envs share (PositionOnlyCartPole, PositionOnlyPendulum): gymnasium's
physics in a float64 state that starts uniform in a box, and an episode cut after
``max_episode_length`` steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv


class ControlEnv(PopgymTensorEnv):
    """A POPGym control env: its state, how it starts, its step count and its copy.

    Args:
        num_envs: copies.
        max_episode_length: steps after which an episode is truncated.
        start: the state starts uniform in ``[-start, start)``, one bound per component, as
            NumPy's ``uniform(-start, start)`` draws it (``low + (high - low) * u``).
        observation_space, action_space: one copy's.
        device: where the state lives.

    State: ``state`` ``(N, len(start))`` float64 and ``steps`` ``(N,)`` int64.
    """

    def __init__(self, num_envs: int, max_episode_length: int, start: Sequence[float],
                 observation_space: spaces.Space[Any], action_space: spaces.Space[Any],
                 device: torch.device | str) -> None:
        self.max_episode_length = max_episode_length
        super().__init__(num_envs, observation_space, action_space,
                         draws_per_episode=len(start), device=device)
        self.start = torch.tensor(start, dtype=torch.float64, device=self.device)
        self.state = torch.zeros(num_envs, len(start), dtype=torch.float64, device=self.device)
        self.steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        low, high = -self.start, self.start
        self.state = torch.where(envs.unsqueeze(1), low + (high - low) * draws, self.state)
        self.steps = torch.where(envs, 0, self.steps)

    def _count_step(self) -> Tensor:
        """Count a step; return where the episode is now truncated (``(N,)`` bool)."""
        self.steps = self.steps + 1
        return self.steps >= self.max_episode_length

    @classmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        cls._check_original(env)
        return {"max_episode_length": int(env.max_episode_length)}

    def _load(self, row: int, env: Any) -> None:
        self.state[row] = torch.as_tensor(np.asarray(env.state, dtype=np.float64))
        self.steps[row] = int(env.num_steps)

"""POPGym's PositionOnlyPendulum as a tensor env: gymnasium's Pendulum-v1, observing only
``(cos θ, sin θ)``, in float64 as gymnasium computes it.

The state ``(θ, θ̇)`` starts uniform in ``[-π, π) x [-1, 1)`` and follows gymnasium's
``PendulumEnv`` (``g = 10``, ``m = l = 1``, ``dt = 0.05``), the torque ``u`` clipped to
``[-2, 2]``::

    cost = normalize(θ)² + 0.1 θ̇² + 0.001 u²            # normalize: into [-π, π)
    θ̇' = clip(θ̇ + (3g / (2l) sin θ + 3 / (m l²) u) dt, -8, 8)
    θ' = θ + θ̇' dt

``u`` is float32 (the action space's dtype), and NumPy keeps the terms with ``u`` in float32
before adding them to float64 ones; so does this env. POPGym maps the reward ``-cost`` from
``[-16.2736044, 0]`` to ``[-1, 1]``, divided by ``max_episode_length``, and truncates the
episode after that many steps; it never terminates. The observation is ``(cos θ, sin θ)`` as
float32. Easy: 200 steps; Medium: 150; Hard: 100.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.control_env import ControlEnv

GRAVITY, MASS, LENGTH, DT = 10.0, 1.0, 1.0, 0.05
MAX_SPEED, MAX_TORQUE = 8, 2.0
START = (math.pi, 1.0)
"""``θ`` and ``θ̇`` start uniform in ``[-START, START)``."""
LOWEST_REWARD, HIGHEST_REWARD = -16.2736044, 0
"""Pendulum's range of rewards, as POPGym takes it."""


def angle_normalize(theta: Tensor) -> Tensor:
    """``theta`` into ``[-π, π)`` (gymnasium's ``angle_normalize``; ``%`` floors, as
    :func:`torch.remainder` does)."""
    return torch.remainder(theta + math.pi, 2 * math.pi) - math.pi


def pendulum_step(state: Tensor, torque: Tensor) -> tuple[Tensor, Tensor]:
    """Gymnasium's ``PendulumEnv.step`` (module docstring), its operations in its order and
    its dtypes: the new state and the cost.

    Shapes: ``state`` ``(N, 2)`` float64, ``torque`` ``(N, 1)`` float32 -> ``(N, 2)``,
    ``(N,)``.
    """
    theta, theta_dot = state.unbind(1)
    u = torque.clamp(-MAX_TORQUE, MAX_TORQUE)[:, 0]
    cost = (angle_normalize(theta).square() + 0.1 * theta_dot.square()
            + (0.001 * u.square()).to(torch.float64))
    push = 3 * GRAVITY / (2 * LENGTH) * torch.sin(theta) + (3.0 / (MASS * LENGTH**2) * u).to(
        torch.float64)
    new_theta_dot = (theta_dot + push * DT).clamp(-MAX_SPEED, MAX_SPEED)
    return torch.stack([theta + new_theta_dot * DT, new_theta_dot], dim=1), cost


class PositionOnlyPendulum(ControlEnv):
    """POPGym's ``PositionOnlyPendulum(max_episode_length)`` for ``num_envs`` envs (module
    docstring).

    State: ``state`` ``(N, 2)`` float64 (``θ, θ̇``) and ``steps`` ``(N,)`` int64.
    """

    def __init__(self, num_envs: int, max_episode_length: int = 200,
                 device: torch.device | str = "cpu") -> None:
        high = np.array([1.0, 1.0], dtype=np.float32)
        torque = spaces.Box(-MAX_TORQUE, MAX_TORQUE, (1,), dtype=np.float32)
        super().__init__(num_envs, max_episode_length, START,
                         spaces.Box(-high, high, dtype=np.float32), torque, device)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        self.state, cost = pendulum_step(self.state, actions.to(torch.float32))
        truncated = self._count_step()
        half_range = (HIGHEST_REWARD - LOWEST_REWARD) / 2
        reward = (-cost + half_range) / half_range / self.max_episode_length
        return reward, torch.zeros_like(truncated), truncated

    def _observe(self) -> Tensor:
        theta = self.state[:, 0]
        return torch.stack([torch.cos(theta), torch.sin(theta)], dim=1).to(torch.float32)

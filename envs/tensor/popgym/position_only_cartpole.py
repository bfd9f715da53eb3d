"""POPGym's PositionOnlyCartPole as a tensor env: gymnasium's CartPole-v1, observing only the
cart's position and the pole's angle, in float64 as gymnasium computes it.

The state ``(x, ẋ, θ, θ̇)`` starts uniform in ``[-0.05, 0.05)`` and follows gymnasium's
``CartPoleEnv`` (Barto, Sutton and Anderson, 1983), Euler steps of ``τ = 0.02`` s under a force
``F = ±10`` (action 1 pushes right)::

    a = (F + m_p l θ̇² sin θ) / (m_c + m_p)
    θ̈ = (g sin θ - cos θ a) / (l (4/3 - m_p cos² θ / (m_c + m_p)))
    ẍ = a - m_p l θ̈ cos θ / (m_c + m_p)
    x, ẋ, θ, θ̇ = x + τ ẋ, ẋ + τ ẍ, θ + τ θ̇, θ̇ + τ θ̈

It terminates when ``|x| > 2.4`` or ``|θ| > 12°``, is truncated after ``max_episode_length``
steps, and every step's reward is ``1 / max_episode_length`` (POPGym maps CartPole's 1 so; the
-1 it gives a step after termination never comes, as the env is reset). The observation is
``(x, θ)`` as float32. Easy: 200 steps; Medium: 400; Hard: 600.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.control_env import ControlEnv

GRAVITY, CART_MASS, POLE_MASS, HALF_LENGTH = 9.8, 1.0, 0.1, 0.5
TOTAL_MASS = POLE_MASS + CART_MASS
POLE_MOMENT = POLE_MASS * HALF_LENGTH
FORCE, TAU = 10.0, 0.02
X_LIMIT, THETA_LIMIT = 2.4, 12 * 2 * math.pi / 360
START = 0.05
"""The state starts uniform in ``[-START, START)``."""


def cartpole_step(state: Tensor, push_right: Tensor) -> Tensor:
    """Gymnasium's ``CartPoleEnv.step`` (module docstring), its operations in its order, so
    that float64 gives its values.

    Shapes: ``state`` ``(N, 4)`` float64, ``push_right`` ``(N,)`` bool -> ``(N, 4)``.
    """
    x, x_dot, theta, theta_dot = state.unbind(1)
    force = torch.where(push_right, FORCE, -FORCE).to(state.dtype)
    cos, sin = torch.cos(theta), torch.sin(theta)
    temp = (force + POLE_MOMENT * theta_dot.square() * sin) / TOTAL_MASS
    theta_acc = (GRAVITY * sin - cos * temp) / (
        HALF_LENGTH * (4.0 / 3.0 - POLE_MASS * cos.square() / TOTAL_MASS))
    x_acc = temp - POLE_MOMENT * theta_acc * cos / TOTAL_MASS
    return torch.stack([x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot,
                        theta_dot + TAU * theta_acc], dim=1)


class PositionOnlyCartPole(ControlEnv):
    """POPGym's ``PositionOnlyCartPole(max_episode_length)`` for ``num_envs`` envs (module
    docstring).

    State: ``state`` ``(N, 4)`` float64 (``x, ẋ, θ, θ̇``) and ``steps`` ``(N,)`` int64.
    """

    def __init__(self, num_envs: int, max_episode_length: int = 200,
                 device: torch.device | str = "cpu") -> None:
        high = np.array([X_LIMIT * 2, THETA_LIMIT * 2], dtype=np.float32)
        super().__init__(num_envs, max_episode_length, (START,) * 4,
                         spaces.Box(-high, high, dtype=np.float32), spaces.Discrete(2), device)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        self.state = cartpole_step(self.state, actions == 1)
        truncated = self._count_step()
        x, theta = self.state[:, 0], self.state[:, 2]
        terminated = (x < -X_LIMIT) | (x > X_LIMIT) | (theta < -THETA_LIMIT) | (
            theta > THETA_LIMIT)
        reward = torch.full(terminated.shape, 1.0 / self.max_episode_length,
                            dtype=torch.float64, device=self.device)
        return reward, terminated, truncated

    def _observe(self) -> Tensor:
        return self.state[:, [0, 2]].to(torch.float32)

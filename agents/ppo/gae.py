"""Generalised advantage estimation with time-limit truncation kept apart from termination."""

from __future__ import annotations

import torch
from torch import Tensor


def compute_gae(rewards: Tensor, values: Tensor, terminated: Tensor, truncated: Tensor,
                final_values: Tensor, last_values: Tensor, gamma: float,
                gae_lambda: float) -> tuple[Tensor, Tensor]:
    r"""Advantages and returns (Schulman et al., 2016) over a rollout of ``T`` steps.

    .. math::
        \delta_t &= r_t + \gamma\, \hat V_{t+1} - V(o_t), \qquad
        \hat V_{t+1} = \begin{cases} 0 & \text{terminated at } t \\
            V(o^{\text{final}}_{t+1}) & \text{truncated at } t \\
            V(o_{t+1}) & \text{otherwise} \end{cases} \\
        A_t &= \delta_t + \gamma \lambda\, (1 - \text{done}_t)\, A_{t+1}

    A terminated episode has no future, so nothing is bootstrapped; a truncated one (the time
    limit ran out) does have one, estimated by the value of the observation it was cut at. Either
    way the advantage does not flow back across the episode boundary.

    Args:
        rewards: reward received after acting at ``t``.
        values: ``V(o_t)``, computed during the rollout.
        terminated: the episode ended at ``t`` (goal, death).
        truncated: the episode was cut at ``t`` by a time limit (and not terminated).
        final_values: ``V`` of the last observation of an episode truncated at ``t``
            (read only where ``truncated``).
        last_values: ``V`` of the observation after the rollout's last step.
        gamma: discount.
        gae_lambda: GAE's λ.

    Shapes:
        - rewards, values, terminated, truncated, final_values: ``(T, B)``
        - last_values: ``(B,)``
        - returns advantages and returns (``advantages + values``), each ``(T, B)``
    """
    terminated = terminated.bool()
    truncated = truncated.bool() & ~terminated
    done = (terminated | truncated).to(values.dtype)
    next_values = torch.cat([values[1:], last_values.unsqueeze(0)])
    next_values = torch.where(truncated, final_values, next_values)
    next_values = torch.where(terminated, torch.zeros_like(next_values), next_values)
    deltas = rewards + gamma * next_values - values
    advantages = torch.zeros_like(values)
    running = torch.zeros_like(last_values)
    for t in reversed(range(values.shape[0])):
        running = deltas[t] + gamma * gae_lambda * (1.0 - done[t]) * running
        advantages[t] = running
    return advantages, advantages + values

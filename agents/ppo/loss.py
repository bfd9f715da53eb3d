r"""The PPO loss on a minibatch of chunks, as a pure function of the model's outputs.

Schulman et al. (2017), "Proximal Policy Optimization Algorithms", eq. 9, negated to be
minimised, plus what the memory cell adds to the loss:

.. math::
    r_t(\theta) &= \frac{\pi_\theta(a_t \mid o_{\le t})}{\pi_{\text{old}}(a_t \mid o_{\le t})}
        = \exp(\log \pi_\theta - \log \pi_{\text{old}}) \\
    L^{CLIP} &= \hat{\mathbb E}_t\big[\min\big(r_t \hat A_t,\;
        \operatorname{clip}(r_t, 1 - \epsilon, 1 + \epsilon)\, \hat A_t\big)\big]
        \quad \text{(eq. 7)} \\
    L^{VF} &= \hat{\mathbb E}_t\big[(V_\theta(o_{\le t}) - R_t)^2\big] \\
    S &= \hat{\mathbb E}_t\big[H(\pi_\theta(\cdot \mid o_{\le t}))\big] \\
    \text{loss} &= -L^{CLIP} + c_1 L^{VF} - c_2 S + L^{\text{cell}}

with :math:`\epsilon` = ``clip``, :math:`c_1` = ``value_coef``, :math:`c_2` = ``entropy_coef``,
:math:`\hat A_t` the GAE advantages (standardised over the minibatch when
``normalize_advantage``), :math:`R_t = \hat A_t + V_{\text{old}}` the returns, and
:math:`L^{\text{cell}}` the cell's auxiliary losses (SA-RNN's update budget, TARNN's Ω). With
``clip_value`` the value loss is clipped as the policy is, as in rl-starter-files and OpenAI
Baselines (not in the paper):
:math:`\max\big((V_\theta - R_t)^2,\, (V_{\text{old}} + \operatorname{clip}(V_\theta -
V_{\text{old}}, -\epsilon, \epsilon) - R_t)^2\big)`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlmem.agents.ppo.config import PPOConfig, decided_value
from rlmem.agents.ppo.model import PolicyOutput
from rlmem.agents.ppo.rollout import ChunkBatch


def loss_advantages(batch: ChunkBatch, config: PPOConfig) -> Tensor:
    r""":math:`\hat A_t` as the loss weighs them: the batch's advantages, standardised over it
    when ``config.normalize_advantage``."""
    advantage = batch.advantages
    if config.normalize_advantage:
        advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
    return advantage


def ppo_loss(outputs: PolicyOutput, batch: ChunkBatch, config: PPOConfig, *,
             advantages: Tensor | None = None) -> tuple[Tensor, dict[str, Tensor | float]]:
    r"""The loss to minimise (module docstring) and its parts, for logging.

    Args:
        outputs: the model run over ``batch``'s chunks from their start states.
        batch: whole chunks of the rollout (:meth:`ChunkBatch.minibatches`).
        config: ``clip``, ``clip_value``, ``normalize_advantage``, ``value_coef`` and
            ``entropy_coef`` are read.
        advantages: :math:`\hat A_t` of ``batch``'s frames, already as
            :func:`loss_advantages` makes them (standardised over a larger minibatch that
            ``batch`` is a part of, :mod:`rlmem.agents.ppo.gradient_parts`); default: those
            of ``batch`` itself.

    Returns:
        the scalar loss, and ``loss/policy`` (:math:`-L^{CLIP}`), ``loss/value``
        (:math:`L^{VF}`), ``loss/entropy`` (:math:`S`), ``loss/memory_aux``, ``loss/total``,
        ``ppo/approx_kl``, ``ppo/clip_fraction`` and the cell's ``memory/...`` diagnostics.
    """
    log_probs, entropies = outputs.head.log_prob_entropy(outputs.action_params, batch.actions)
    entropy = entropies.mean()
    advantage = loss_advantages(batch, config) if advantages is None else advantages
    log_ratio = log_probs - batch.old_log_probs
    ratio = torch.exp(log_ratio)
    clipped_ratio = torch.clamp(ratio, 1.0 - config.clip, 1.0 + config.clip)
    policy_loss = -torch.min(ratio * advantage, clipped_ratio * advantage).mean()
    value_loss = _value_loss(outputs.value, batch, config)
    aux_loss = outputs.aux.total_loss()
    entropy_coef = float(decided_value(config, "entropy_coef"))
    loss = (policy_loss - entropy_coef * entropy + config.value_coef * value_loss
            + aux_loss)
    with torch.no_grad():
        stats = {
            "loss/policy": policy_loss, "loss/value": value_loss, "loss/entropy": entropy,
            "loss/memory_aux": aux_loss, "loss/total": loss,
            # Schulman's k3 estimator of KL(old || new): unbiased, never negative.
            "ppo/approx_kl": ((ratio - 1) - log_ratio).mean(),
            "ppo/clip_fraction": ((ratio - 1).abs() > config.clip).float().mean(),
            **{f"memory/{key}": value for key, value in outputs.aux.diagnostics.items()},
        }
    return loss, stats


def _value_loss(values: Tensor, batch: ChunkBatch, config: PPOConfig) -> Tensor:
    """:math:`L^{VF}`, clipped around the rollout's values when ``config.clip_value``."""
    loss = (values - batch.returns).pow(2)
    if config.clip_value:
        clipped = batch.old_values + torch.clamp(values - batch.old_values, -config.clip,
                                                 config.clip)
        loss = torch.max(loss, (clipped - batch.returns).pow(2))
    return loss.mean()

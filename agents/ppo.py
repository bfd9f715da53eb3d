"""Our recurrent PPO: the hyperparameters and the update, readable top to bottom.

One update (Schulman et al., 2017, with the MiniGrid recipe of rl-starter-files):

1. :class:`~rlmem.agents.rollout.RolloutCollector` runs ``frames_per_env`` steps of every env.
2. GAE turns rewards and values into advantages and returns, bootstrapping time-limit
   truncations from the value of the last observation and not bootstrapping terminations
   (:func:`~rlmem.agents.gae.compute_gae`).
3. The rollout is cut into chunks of ``recurrence`` steps per env. Each chunk is replayed from
   the memory state stored at its start during the rollout (detached: truncated BPTT), and the
   resets inside the chunk are handed to the cell, which re-initialises only the envs that
   start a new episode.
4. ``epochs`` passes over the chunks in random minibatches of ``batch_size`` frames minimise the
   clipped surrogate, the (clipped) value loss, minus the entropy bonus, plus the memory cell's
   own auxiliary losses. Log-probabilities and entropies come from the model's action head
   (:mod:`rlmem.agents.heads`), so every action space shares this loss.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from rlmem.agents.gae import compute_gae
from rlmem.agents.model import ActorCritic
from rlmem.agents.ppo_hyperparameters import PPOHyperparameters, check_ppo_hyperparameters
from rlmem.agents.rollout import Rollout, select_state
from rlmem.runs import NonFiniteLossError


@dataclass
class PPOConfig(PPOHyperparameters):
    """Hyperparameters of our PPO (``agent=ppo``): the shared ones, plus the BPTT chunk."""

    name: str = "ppo"
    """Trainer name (``agent=ppo``)."""
    recurrence: int = 16
    """Steps of backpropagation through time: the chunk length (``batch_size / recurrence``
    chunks per minibatch)."""


def check_ppo_config(config: Any) -> None:
    """Raise a :class:`ValueError` naming the key when a PPO hyperparameter is out of range."""
    check_ppo_hyperparameters(config)
    if config.recurrence <= 0:
        raise ValueError(f"agent.recurrence must be positive, got {config.recurrence}")
    if config.frames_per_env % config.recurrence:
        raise ValueError(f"agent.frames_per_env={config.frames_per_env} must be a multiple of "
                         f"agent.recurrence={config.recurrence}")
    if config.batch_size % config.recurrence:
        raise ValueError(f"agent.batch_size={config.batch_size} must be a multiple of "
                         f"agent.recurrence={config.recurrence}")


def _chunks(value: Tensor, recurrence: int) -> Tensor:
    """``(T, B, ...)`` -> ``(recurrence, T / recurrence * B, ...)``: time within a chunk first,
    then chunk ``k`` of env ``b`` at column ``k * B + b`` (the layout of ``chunk_states``)."""
    steps, batch = value.shape[:2]
    chunked = value.reshape(steps // recurrence, recurrence, batch, *value.shape[2:])
    return chunked.transpose(0, 1).reshape(recurrence, -1, *value.shape[2:])


class PPO:
    """PPO updates of an :class:`~rlmem.agents.model.ActorCritic`.

    Args:
        model: the actor-critic, already on its device.
        config: a :class:`PPOConfig` (or a config with the same keys).
    """

    def __init__(self, model: ActorCritic, config: Any) -> None:
        check_ppo_config(config)
        self.model = model
        self.config = config
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, eps=config.adam_eps)

    def update(self, rollout: Rollout, progress: float) -> dict[str, float]:
        """One PPO update on ``rollout``; returns the means of the losses and diagnostics.

        Args:
            rollout: from :meth:`RolloutCollector.collect` with this config's ``recurrence``.
            progress: fraction of training done, in ``[0, 1]`` (anneals e.g. SA-RNN's slope).

        Raises:
            NonFiniteLossError: before applying a non-finite loss; earlier minibatches of this
                update have been applied.
        """
        cfg = self.config
        self.model.memory.anneal(progress)
        advantages, returns = compute_gae(
            rollout.rewards, rollout.values, rollout.terminated, rollout.truncated,
            rollout.final_values, rollout.last_values, cfg.gamma, cfg.gae_lambda)

        # Chunks of `recurrence` steps as the columns of (recurrence, chunks, ...) tensors.
        recurrence = cfg.recurrence
        observations = {key: _chunks(value, recurrence)
                        for key, value in rollout.observations.items()}
        resets = _chunks(rollout.resets, recurrence)
        actions = _chunks(rollout.actions, recurrence)
        old_log_probs = _chunks(rollout.log_probs, recurrence)
        old_values = _chunks(rollout.values, recurrence)
        advantages = _chunks(advantages, recurrence)
        returns = _chunks(returns, recurrence)
        start_states = type(rollout.chunk_states)(
            *(value.flatten(0, 1) for value in rollout.chunk_states))
        num_chunks = resets.shape[1]
        chunks_per_batch = max(1, cfg.batch_size // recurrence)

        sums: dict[str, float] = defaultdict(float)
        batches = 0
        for _ in range(cfg.epochs):
            for index in torch.randperm(num_chunks, device=resets.device).split(chunks_per_batch):
                out = self.model({key: value[:, index] for key, value in observations.items()},
                                 select_state(start_states, index), resets[:, index])

                # The head of the action space: categorical, per-component, or Gaussian.
                log_probs, entropies = out.head.log_prob_entropy(out.action_params,
                                                                 actions[:, index])
                entropy = entropies.mean()

                advantage = advantages[:, index]
                if cfg.normalize_advantage:
                    advantage = (advantage - advantage.mean()) / (advantage.std() + 1e-8)
                ratio = torch.exp(log_probs - old_log_probs[:, index])
                policy_loss = -torch.min(
                    ratio * advantage,
                    torch.clamp(ratio, 1.0 - cfg.clip, 1.0 + cfg.clip) * advantage).mean()

                target = returns[:, index]
                value_loss = (out.value - target).pow(2)
                if cfg.clip_value:
                    old_value = old_values[:, index]
                    clipped = old_value + torch.clamp(out.value - old_value, -cfg.clip, cfg.clip)
                    value_loss = torch.max(value_loss, (clipped - target).pow(2))
                value_loss = value_loss.mean()

                aux_loss = out.aux.total_loss()
                loss = (policy_loss - cfg.entropy_coef * entropy + cfg.value_coef * value_loss
                        + aux_loss)
                if not torch.isfinite(loss):
                    raise NonFiniteLossError(
                        f"the PPO loss is {loss.item()} (policy {policy_loss.item()}, value "
                        f"{value_loss.item()}, entropy {entropy.item()}, memory aux "
                        f"{float(aux_loss)}); stopping before applying it.")

                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                           cfg.max_grad_norm)
                self.optimizer.step()

                with torch.no_grad():
                    log_ratio = log_probs - old_log_probs[:, index]
                    stats = {
                        "loss/policy": policy_loss, "loss/value": value_loss,
                        "loss/entropy": entropy, "loss/memory_aux": aux_loss, "loss/total": loss,
                        "ppo/grad_norm": grad_norm,
                        "ppo/approx_kl": ((ratio - 1) - log_ratio).mean(),
                        "ppo/clip_fraction": ((ratio - 1).abs() > cfg.clip).float().mean(),
                        **{f"memory/{key}": value for key, value in out.aux.diagnostics.items()},
                    }
                for key, value in stats.items():
                    sums[key] += float(value.detach()) if isinstance(value, Tensor) \
                        else float(value)
                batches += 1

        metrics = {key: total / batches for key, total in sums.items()}
        explained = 1 - (returns - old_values).var() / returns.var().clamp(min=1e-8)
        metrics["ppo/explained_variance"] = float(explained) if math.isfinite(explained) \
            else float("nan")
        return metrics

    def state_dict(self) -> dict[str, Any]:
        """The optimizer state, for checkpoints."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.optimizer.load_state_dict(state["optimizer"])

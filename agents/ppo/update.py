"""One update of our recurrent PPO (Schulman et al., 2017, with the MiniGrid recipe of
rl-starter-files), on a rollout from :class:`~rlmem.agents.ppo.collector.RolloutCollector`:

1. GAE turns rewards and values into advantages and returns, bootstrapping time-limit
   truncations from the value of the last observation and not bootstrapping terminations
   (:func:`~rlmem.agents.ppo.gae.compute_gae`).
2. The rollout is cut into its chunks of ``recurrence`` steps per env
   (:meth:`~rlmem.agents.ppo.rollout.Rollout.chunks`). Each chunk is replayed from the memory
   state stored at its start during the rollout (detached: truncated BPTT), and the resets
   inside the chunk are handed to the cell, which re-initialises only the envs that start a new
   episode.
3. ``epochs`` passes over the chunks in random minibatches of ``batch_size`` frames each take
   one Adam step on :func:`~rlmem.agents.ppo.loss.ppo_loss`, after clipping the gradient norm.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import torch
from torch import Tensor

from rlmem.agents.ppo.config import PPOConfig
from rlmem.agents.ppo.gae import compute_gae
from rlmem.agents.ppo.loss import ppo_loss
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.rollout import ChunkBatch, Rollout
from rlmem.runs import NonFiniteLossError


class PPO:
    """PPO updates of an :class:`~rlmem.agents.ppo.model.ActorCritic`.

    Args:
        model: the actor-critic, already on its device.
        config: the hyperparameters (checked when the config was built).
    """

    def __init__(self, model: ActorCritic, config: PPOConfig) -> None:
        self.model = model
        self.config = config
        self.optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, eps=config.adam_eps)

    def update(self, rollout: Rollout) -> dict[str, float]:
        """One PPO update on ``rollout``; returns the means of the losses and diagnostics over
        its minibatches, and the explained variance of the rollout's values.

        Raises:
            NonFiniteLossError: before applying a non-finite loss; earlier minibatches of this
                update have been applied.
        """
        cfg = self.config
        advantages, returns = compute_gae(
            rollout.rewards, rollout.values, rollout.terminated, rollout.truncated,
            rollout.final_values, rollout.last_values, cfg.gamma, cfg.gae_lambda)
        chunks = rollout.chunks(advantages, returns)
        sums: dict[str, float] = defaultdict(float)
        batches = 0
        for _ in range(cfg.epochs):
            for batch in chunks.minibatches(cfg.batch_size):
                for key, value in self.step(batch).items():
                    sums[key] += _number(value)
                batches += 1
        metrics = {key: total / batches for key, total in sums.items()}
        metrics["ppo/explained_variance"] = explained_variance(chunks.returns, chunks.old_values)
        return metrics

    def step(self, batch: ChunkBatch) -> dict[str, Tensor | float]:
        """One optimizer step on the PPO loss of ``batch``; returns the loss's parts and the
        gradient norm before clipping."""
        out = self.model(batch.observations, batch.start_state, batch.resets)
        loss, stats = ppo_loss(out, batch, self.config)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"the PPO loss is {loss.item()} (policy {_number(stats['loss/policy'])}, value "
                f"{_number(stats['loss/value'])}, entropy {_number(stats['loss/entropy'])}, "
                f"memory aux {_number(stats['loss/memory_aux'])}); stopping before applying it.")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                   self.config.max_grad_norm)
        self.optimizer.step()
        return {**stats, "ppo/grad_norm": grad_norm}

    def state_dict(self) -> dict[str, Any]:
        """The optimizer state, for checkpoints."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.optimizer.load_state_dict(state["optimizer"])


def _number(value: Tensor | float) -> float:
    return float(value.detach()) if isinstance(value, Tensor) else float(value)


def explained_variance(returns: Tensor, values: Tensor) -> float:
    """:math:`1 - \\operatorname{Var}(R - V) / \\operatorname{Var}(R)`: 1 when the values predict
    the returns, 0 when they do no better than a constant; NaN when it is undefined."""
    explained = 1 - (returns - values).var() / returns.var().clamp(min=1e-8)
    return float(explained) if math.isfinite(explained) else float("nan")

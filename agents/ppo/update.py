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
   With ``update_threads`` above 1 (on the CPU), a minibatch's gradient is computed in parts,
   one thread each (:mod:`~rlmem.agents.ppo.gradient_parts`): the same gradient, rounded
   otherwise. With ``processes`` above 1, each process's replica takes its share of every
   minibatch from its own rollout and the replicas' gradients are averaged before the step
   (:mod:`~rlmem.agents.ppo.replicas`): the same gradient again, rounded otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from rlmem.agents.ppo.config import PPOConfig, decided_value
from rlmem.agents.ppo.fused_adam import FusedAdam
from rlmem.agents.ppo.gae import compute_gae
from rlmem.agents.ppo.gradient_parts import GradientInParts
from rlmem.agents.ppo.loss import ppo_loss
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.replicas import Replicas
from rlmem.agents.ppo.rollout import ChunkBatch, Rollout
from rlmem.runs import NonFiniteLossError


class PPO:
    """PPO updates of an :class:`~rlmem.agents.ppo.model.ActorCritic`.

    Args:
        model: the actor-critic, already on its device.
        config: the hyperparameters (checked when the config was built).
        replicas: this process's replica of a data-parallel run (``processes`` above 1), whose
            minibatches are its share (``batch_size / P`` frames) and whose gradients are the
            replicas' mean; None: the run's only process.
    """

    def __init__(self, model: ActorCritic, config: PPOConfig,
                 replicas: Replicas | None = None) -> None:
        self.model = model
        self.config = config
        self.replicas = replicas
        self.trainable = model.trainable_parameters()
        """The weights whose gradients the replicas average, in the order they exchange them."""
        self.optimizer = adam(model, config)
        threads = int(config.update_threads or 1)
        on_cpu = all(parameter.device.type == "cpu" for parameter in model.parameters())
        self.in_parts = GradientInParts(model, config, threads) if threads > 1 and on_cpu else None
        """The minibatch's gradient in parts, one thread each; None: in one piece, here."""

    def update(self, rollout: Rollout) -> dict[str, float]:
        """One PPO update on ``rollout``; returns the means of the losses and diagnostics over
        its minibatches, and the explained variance of the rollout's values.

        Raises:
            NonFiniteLossError: before applying a non-finite loss; earlier minibatches of this
                update have been applied.
        """
        cfg = self.config
        rewards = rollout.rewards if cfg.reward_scale in (None, 1.0) else (
            rollout.rewards * cfg.reward_scale)  # the values learn the scaled returns
        advantages, returns = compute_gae(
            rewards, rollout.values, rollout.terminated, rollout.truncated,
            rollout.final_values, rollout.last_values, cfg.gamma, cfg.gae_lambda)
        chunks = rollout.chunks(advantages, returns)
        # Summed where they are computed, in float64 and in minibatch order (exactly the sums
        # of Python floats that earlier versions kept), and read once per update: no host
        # read per minibatch, which on a GPU would wait for every step.
        keys: list[str] = []
        sums: Tensor | None = None
        batches, batch_size = 0, int(decided_value(cfg, "batch_size"))
        if self.replicas is not None:
            batch_size //= self.replicas.size  # this replica's share of each minibatch
        for _ in range(int(decided_value(cfg, "epochs"))):
            for batch in chunks.minibatches(batch_size):
                stats = self.step(batch)
                row = _float64_row(stats.values(), rollout.rewards.device)
                if sums is None:
                    keys, sums = list(stats), row
                else:
                    assert list(stats) == keys, "a minibatch's statistics changed their keys"
                    sums = sums + row
                batches += 1
        totals = sums.tolist() if sums is not None else []
        metrics = {key: total / batches for key, total in zip(keys, totals, strict=True)}
        if self.replicas is not None:
            metrics = self.replicas.mean_metrics(metrics)
        metrics["ppo/explained_variance"] = explained_variance(
            chunks.returns, chunks.old_values, self.replicas)
        return metrics

    def step(self, batch: ChunkBatch) -> dict[str, Tensor | float]:
        """One optimizer step on the PPO loss of ``batch``; returns the loss's parts and the
        gradient norm before clipping."""
        self.optimizer.zero_grad(set_to_none=True)
        advantages = None
        if self.replicas is not None and self.config.normalize_advantage:
            advantages = self.replicas.standardise(batch.advantages)  # over every replica's
        if self.in_parts is not None:
            loss, stats = self.in_parts(batch, advantages)
        else:
            out = self.model(batch.observations, batch.start_state, batch.resets)
            loss, stats = ppo_loss(out, batch, self.config, advantages=advantages)
        finite = bool(torch.isfinite(loss))
        if finite and self.in_parts is None:
            loss.backward()
        if not finite:
            if self.replicas is not None:
                self.replicas.average_gradients(self.trainable, loss)  # they stop too
            raise NonFiniteLossError(
                f"the PPO loss is {loss.item()} (policy {_number(stats['loss/policy'])}, value "
                f"{_number(stats['loss/value'])}, entropy {_number(stats['loss/entropy'])}, "
                f"memory aux {_number(stats['loss/memory_aux'])}); stopping before applying it.")
        if self.replicas is not None:
            losses = self.replicas.average_gradients(self.trainable, loss)
            if not bool(torch.isfinite(losses).all()):
                others = (~torch.isfinite(losses)).nonzero().flatten().tolist()
                raise NonFiniteLossError(
                    f"the PPO loss of replica {', '.join(map(str, others))} is not finite "
                    f"({', '.join(f'{value:g}' for value in losses.tolist())} in replica "
                    "order); every replica stops before applying it.")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable,
                                                   self.config.max_grad_norm, foreach=True)
        self.optimizer.step()
        return {**stats, "ppo/grad_norm": grad_norm}

    def state_dict(self) -> dict[str, Any]:
        """The optimizer state, for checkpoints."""
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (with either optimizer's state: the run's
        ``fused_adam`` decides the kernel, whatever the checkpoint's recorded)."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.use_the_runs_kernels()

    def use_the_runs_kernels(self) -> None:
        """After loading an optimizer state into torch's Adam, which brings the checkpoint's
        own kernel choice (older ones: the default loop), step with ``foreach`` again."""
        if isinstance(self.optimizer, torch.optim.Adam):
            for group in self.optimizer.param_groups:
                group["fused"], group["foreach"] = None, True


def adam(model: ActorCritic, config: PPOConfig) -> FusedAdam | torch.optim.Adam:
    """The update's Adam: with ``config.fused_adam``, :class:`FusedAdam` (one fused kernel per
    weight's dtype and device; the same update rounded otherwise); else torch's ``foreach``
    steps (one call per operation over every parameter; on the CPU its slow path runs the
    default loop's per-tensor kernels, so the weights are the loop's bit for bit:
    ``tests/agents/test_ppo_sync_fixture.py``)."""
    if config.fused_adam:
        return FusedAdam(model.parameters(), lr=config.lr, eps=config.adam_eps)
    return torch.optim.Adam(model.parameters(), lr=config.lr, eps=config.adam_eps,
                            foreach=True)


def _float64_row(values: Iterable[Tensor | float], device: torch.device) -> Tensor:
    """The statistics as one float64 vector, each value exactly as a float64 scalar of it
    (a float as Python holds it): one stack, which promotes, in place of a conversion each."""
    with torch.no_grad():
        row = torch.stack([value.reshape(()) if isinstance(value, Tensor) else
                           torch.tensor(float(value), dtype=torch.float64, device=device)
                           for value in values])
    return row.to(torch.float64)


def _number(value: Tensor | float) -> float:
    return float(value.detach()) if isinstance(value, Tensor) else float(value)


def explained_variance(returns: Tensor, values: Tensor,
                       replicas: Replicas | None = None) -> float:
    """:math:`1 - \\operatorname{Var}(R - V) / \\operatorname{Var}(R)`: 1 when the values predict
    the returns, 0 when they do no better than a constant; NaN when it is undefined. With
    ``replicas``, over every replica's returns and values together."""
    if replicas is None:
        residual_var, returns_var = (returns - values).var(), returns.var()
    else:
        residual_var = replicas.mean_and_std(returns - values)[1].pow(2)
        returns_var = replicas.mean_and_std(returns)[1].pow(2)
    explained = 1 - residual_var / returns_var.clamp(min=1e-8)
    return float(explained) if math.isfinite(explained) else float("nan")

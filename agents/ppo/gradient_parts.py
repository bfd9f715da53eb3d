r"""A minibatch's PPO gradient computed in parts, one thread each, so that a second CPU core
shortens the update (issue 59; ``agent.update_threads``).

The minibatch's :math:`N` chunks are dealt, in order, into :math:`P` parts of
:math:`N_1, \dots, N_P` chunks (``torch.tensor_split``). Part :math:`k`'s loss
:math:`\mathcal L_k` is the PPO loss of its chunks alone, and

.. math::
    \nabla \mathcal L = \sum_{k=1}^{P} \frac{N_k}{N}\, \nabla \mathcal L_k

holds exactly in real arithmetic, because every term of :mod:`rlmem.agents.ppo.loss` is a mean
over the minibatch's frames (each chunk has the same ``recurrence`` frames), the cells'
auxiliary losses are means over its chunks (SA-RNN's update budget) or do not depend on the batch
at all (TARNN's :math:`\Omega`: :math:`\sum_k \frac{N_k}{N} \Omega = \Omega`), and the
advantages are standardised (``normalize_advantage``) over the whole minibatch before it is
split. The logged losses and PPO statistics are the same weighted sums of the parts' (means over
the minibatch's frames, as the one-thread update logs them). A cell's diagnostics
(``memory/...``) are logged as the same weighted mean of the parts' values: equal to the
minibatch's for the diagnostics that are means over its frames, and an average of the parts'
for the few that are ratios over a subset (ReLSTM's ``relevant_score``, a mean over the filled
slots only).

Only the rounding differs from the one-thread update: each part's gradient is summed over fewer
frames, and the parts' gradients are then added in part order (``g_1 + g_2 + ...``, on the
calling thread, whichever thread finished first), so the result is the same on every run.
``tests/agents/test_gradient_parts.py`` holds it equal to the one-thread gradient in float64.

Each part's forward and backward run in a thread of a pool: torch's CPU kernels and its autograd
engine release Python's lock while they compute, so two parts use two cores. The pool's threads
take the calling thread's subnormal-float flag (:mod:`rlmem.runs.arithmetic`), which is a flag of
each CPU thread. Where the cells' Triton kernels run through Triton's interpreter
(``RLMEM_TRITON=interpret``, the tests), the parts run one after the other on the calling
thread: the interpreter patches Triton's language module while a kernel runs, so two kernels
cannot run at once. The sums are the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import torch
from torch import Tensor

from rlmem.agents.ppo.config import PPOConfig
from rlmem.agents.ppo.loss import loss_advantages, ppo_loss
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.rollout import ChunkBatch
from rlmem.cells._engines.gpu import interpreting
from rlmem.runs.arithmetic import flushing_subnormals


@dataclass(frozen=True)
class PartGradient:
    """One part's weighted loss, statistics and gradient (None: its loss was not finite, so
    no gradient was computed)."""

    loss: Tensor
    stats: dict[str, Tensor | float]
    gradients: tuple[Tensor | None, ...] | None


class GradientInParts:
    """The PPO loss of a minibatch and its gradient, computed in ``parts`` parts, one thread
    each (module docstring).

    Args:
        model: the actor-critic whose trainable parameters receive the gradient.
        config: the PPO config the loss reads.
        parts: threads, and the most parts a minibatch is cut into (fewer where it has fewer
            chunks).
    """

    def __init__(self, model: ActorCritic, config: PPOConfig, parts: int) -> None:
        if parts < 2:
            raise ValueError(f"GradientInParts needs at least 2 parts, got {parts}")
        self.model = model
        self.config = config
        self.parts = parts
        self.parameters = model.trainable_parameters()
        self._pool: ThreadPoolExecutor | None = None

    def __call__(self, batch: ChunkBatch, advantages: Tensor | None = None
                 ) -> tuple[Tensor, dict[str, Tensor | float]]:
        """The minibatch's loss and statistics; sets each trainable parameter's ``grad`` to the
        loss's gradient where the loss is finite (leaves the gradients as they were where it is
        not, so the caller can stop before applying it). ``advantages``: as
        :func:`~rlmem.agents.ppo.loss.ppo_loss` takes them; default: ``batch``'s own."""
        if advantages is None:
            advantages = loss_advantages(batch, self.config)
        chunks = torch.arange(batch.num_chunks, device=batch.resets.device)
        parts = [(batch.select(index), advantages[:, index], len(index) / batch.num_chunks)
                 for index in torch.tensor_split(chunks, min(self.parts, batch.num_chunks))]
        if interpreting():  # Triton's interpreter runs in one thread at a time
            results = [self._part(*part) for part in parts]
        else:
            futures = [self._threads().submit(self._part, *part) for part in parts]
            results = [future.result() for future in futures]  # in part order, as summed
        loss = _in_order([result.loss for result in results])
        stats = {key: _in_order([result.stats[key] for result in results])
                 for key in results[0].stats}
        gradients = [result.gradients for result in results]
        if all(part is not None for part in gradients):
            for position, parameter in enumerate(self.parameters):
                terms = [term for part in gradients if part is not None
                         for term in (part[position],) if term is not None]
                parameter.grad = _in_order(terms) if terms else None
        return loss, stats

    def _part(self, part: ChunkBatch, advantages: Tensor,
              weight: float) -> PartGradient:
        """One part's loss and statistics, weighted by its share of the chunks, and the
        weighted loss's gradient where it is finite."""
        out = self.model(part.observations, part.start_state, part.resets)
        loss, stats = ppo_loss(out, part, self.config, advantages=advantages)
        weighted = loss * weight
        stats = {key: value * weight for key, value in stats.items()}
        if not torch.isfinite(weighted):
            return PartGradient(weighted.detach(), stats, None)
        gradients = torch.autograd.grad(weighted, self.parameters, allow_unused=True)
        return PartGradient(weighted.detach(), stats, tuple(gradients))

    def _threads(self) -> ThreadPoolExecutor:
        """The pool, made at first use, in the thread and under the subnormal-float flag the
        update runs with."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(
                self.parts, thread_name_prefix="rlmem-update",
                initializer=torch.set_flush_denormal, initargs=(flushing_subnormals(),))
        return self._pool

    def close(self) -> None:
        """Stop the pool's threads (idle between updates; a later call makes them again)."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


T = TypeVar("T", Tensor, "Tensor | float")


def _in_order(values: Sequence[T]) -> T:
    """``values[0] + values[1] + ...``, in this order."""
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total

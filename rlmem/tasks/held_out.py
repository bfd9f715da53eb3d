"""A sequence model's metrics on held-out batches: one fixed batch per ``T``, at the training
``T`` or at transfer ``T``, drawn from its own generator (:func:`held_out_batch`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import torch
from torch import Tensor

from rlmem.tasks.amp import autocast
from rlmem.tasks.base import SequenceTask, TaskBatch
from rlmem.tasks.model import SequenceModel

EVAL_CHUNK = 256
"""Steps per forward call at evaluation: bounds the traces a cell keeps (MemLSTM's attention
trace grows as ``L × B × L``) without changing the result, since the state is carried over."""


def held_out_batch(task: SequenceTask, batch_size: int, seed: int, seq_len: int,
                   device: torch.device) -> TaskBatch:
    """The evaluation batch at ``seq_len`` of a run of ``seed``: the same batch at every
    evaluation of a run (smooth curves), independent of the training stream.

    It is drawn on the CPU and then moved to ``device``: CPU and CUDA generators give different
    streams from one seed, and a run's held-out batch must not depend on where it trained (a
    model trained with ``device=cuda`` and re-scored on the CPU sees the batch it was scored on).
    """
    generator = torch.Generator()
    generator.manual_seed(1_000_003 * (seed + 1) + seq_len)
    batch = task.sample(batch_size, seq_len, generator)
    return TaskBatch(batch.inputs.to(device), batch.targets.to(device))


CONFIRMATION_SEEDS = 1_000
"""Confirmation batch ``k`` of a run of seed ``s`` is the evaluation batch of seed
``CONFIRMATION_SEEDS + MAX_CONFIRM_BATCHES · s + k`` (:func:`held_out_batch`): no run of a seed
below ``CONFIRMATION_SEEDS`` evaluates on it, and no two runs share one."""

MAX_CONFIRM_BATCHES = 100
"""Confirmation batches a run may draw (``k < MAX_CONFIRM_BATCHES``)."""


def confirmation_seed(seed: int, k: int) -> int:
    """The evaluation seed of confirmation batch ``k`` of a run of seed ``seed``."""
    if not 0 <= k < MAX_CONFIRM_BATCHES:
        raise ValueError(f"confirmation batch {k} out of range [0, {MAX_CONFIRM_BATCHES})")
    return CONFIRMATION_SEEDS + MAX_CONFIRM_BATCHES * seed + k


class ChunkedRun(NamedTuple):
    """What :func:`run_in_chunks` returns."""

    outputs: Tensor
    """The model's outputs, ``(L, B, output_size)`` float."""
    state: object
    """The cell's state after the last step (to go on from, or to look into)."""
    traces: dict[str, Tensor]
    """The cell's traces of the last ``traced`` steps, each ``(traced, B, ...)`` (empty when
    ``traced`` is 0)."""


@torch.no_grad()
def predict(model: SequenceModel, batch: TaskBatch, chunk: int = EVAL_CHUNK,
            amp: bool = False) -> Tensor:
    """The model's outputs on ``batch``, run ``chunk`` steps at a time.

    Shapes:
        - returns ``(L, B, output_size)``.
    """
    return run_in_chunks(model, batch.inputs, None, chunk, amp).outputs


@torch.no_grad()
def run_in_chunks(model: SequenceModel, inputs: Tensor, state: object | None = None,
                  chunk: int = EVAL_CHUNK, amp: bool = False, traced: int = 0) -> ChunkedRun:
    """The model's outputs on ``inputs`` from ``state`` (``None``: zero), run ``chunk`` steps
    at a time, its state after the last step, and its traces of the last ``traced`` steps
    (those steps run as a chunk of their own, so that no other step's traces are kept).

    Shapes:
        - inputs ``(L, B, ...)``; see :class:`ChunkedRun` for what is returned.
    """
    length = inputs.shape[0]
    traced = min(max(traced, 0), length)
    starts = sorted({*range(0, length - traced, chunk), *([length - traced] if traced else [])})
    outputs, traces = [], []
    with autocast(inputs.device, amp):
        for start, stop in zip(starts, [*starts[1:], length], strict=True):
            output, result = model(inputs[start:stop], state)
            outputs.append(output.float())
            state = result.state
            if start >= length - traced:
                traces.append(result.aux.traces)
    kept = {key: torch.cat([step[key] for step in traces]) for key in traces[0]} if traces else {}
    return ChunkedRun(torch.cat(outputs), state, kept)


def evaluate(model: SequenceModel, task: SequenceTask, seq_lens: Iterable[int], batch_size: int,
             seed: int, device: torch.device, amp: bool = False) -> dict[str, float]:
    """Metrics of ``model`` on one fixed batch per ``T``, keyed ``<metric>@T<T>``."""
    was_training = model.training
    model.eval()
    results: dict[str, float] = {}
    try:
        for seq_len in seq_lens:
            batch = held_out_batch(task, batch_size, seed, seq_len, device)
            run = run_in_chunks(model, batch.inputs, amp=amp, traced=task.traced_steps())
            metrics = {**task.metrics(run.outputs, batch),
                       **task.trace_metrics(run.traces, batch)}
            for key, value in metrics.items():
                results[f"{key}@T{seq_len}"] = float(value)
    finally:
        model.train(was_training)
    return results


class Confirmation(NamedTuple):
    """The task's score on each confirmation batch (:func:`confirmation_score`)."""

    scores: list[float]

    @property
    def pooled(self) -> float:
        """Their mean: with batches of equal size, the score over all their sequences."""
        return sum(self.scores) / len(self.scores)


def confirmation_score(model: SequenceModel, task: SequenceTask, seq_len: int, batches: int,
                       batch_size: int, seed: int, device: torch.device, amp: bool = False,
                       first: int = 0) -> Confirmation:
    """The task's score (:attr:`~rlmem.tasks.SequenceTask.score`) at ``seq_len`` on each of
    the confirmation batches ``first … first + batches - 1`` (:func:`confirmation_seed`):
    batches that neither the training stream nor the run's own evaluation batch draws, to
    check a score that was selected on the evaluation batch."""
    key = f"{task.score}@T{seq_len}"
    return Confirmation([evaluate(model, task, [seq_len], batch_size, confirmation_seed(seed, k),
                                  device, amp)[key] for k in range(first, first + batches)])

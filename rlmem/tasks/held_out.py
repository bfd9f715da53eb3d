"""A sequence model's metrics on held-out batches: one fixed batch per ``T``, at the training
``T`` or at transfer ``T``, drawn from its own generator (:func:`eval_generator`)."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from rlmem.tasks.amp import autocast
from rlmem.tasks.base import SequenceTask, TaskBatch
from rlmem.tasks.model import SequenceModel

EVAL_CHUNK = 256
"""Steps per forward call at evaluation: bounds the traces a cell keeps (MemLSTM's attention
trace grows as ``L × B × L``) without changing the result, since the state is carried over."""


def eval_generator(device: torch.device, seed: int, seq_len: int) -> torch.Generator:
    """The generator of the evaluation batch at ``seq_len``: the same batch at every evaluation
    of a run (smooth curves), independent of the training stream."""
    generator = torch.Generator(device=device)
    generator.manual_seed(1_000_003 * (seed + 1) + seq_len)
    return generator


@torch.no_grad()
def predict(model: SequenceModel, batch: TaskBatch, chunk: int = EVAL_CHUNK,
            amp: bool = False) -> Tensor:
    """The model's outputs on ``batch``, run ``chunk`` steps at a time.

    Shapes:
        - returns ``(L, B, output_size)``.
    """
    return run_in_chunks(model, batch.inputs, None, chunk, amp)[0]


@torch.no_grad()
def run_in_chunks(model: SequenceModel, inputs: Tensor, state: object | None = None,
                  chunk: int = EVAL_CHUNK, amp: bool = False) -> tuple[Tensor, object]:
    """The model's outputs on ``inputs`` from ``state`` (``None``: zero), run ``chunk`` steps
    at a time, and its state after the last step (to go on from, or to look into).

    Shapes:
        - inputs ``(L, B, ...)``; returns outputs ``(L, B, output_size)`` and the state.
    """
    outputs = []
    with autocast(inputs.device, amp):
        for start in range(0, inputs.shape[0], chunk):
            output, result = model(inputs[start:start + chunk], state)
            outputs.append(output.float())
            state = result.state
    return torch.cat(outputs), state


def evaluate(model: SequenceModel, task: SequenceTask, seq_lens: Iterable[int], batch_size: int,
             seed: int, device: torch.device, amp: bool = False) -> dict[str, float]:
    """Metrics of ``model`` on one fixed batch per ``T``, keyed ``<metric>@T<T>``."""
    was_training = model.training
    model.eval()
    results: dict[str, float] = {}
    try:
        for seq_len in seq_lens:
            batch = task.sample(batch_size, seq_len, eval_generator(device, seed, seq_len))
            outputs = predict(model, batch, amp=amp)
            for key, value in task.metrics(outputs, batch).items():
                results[f"{key}@T{seq_len}"] = float(value)
    finally:
        model.train(was_training)
    return results

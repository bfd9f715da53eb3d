"""The metrics of the papers (per-step cross-entropy, recall accuracy, mean squared error), and
what an attentive cell's memory holds and where its recall looks (:func:`held_share`,
:func:`attention_on_steps`)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def sequence_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Cross-entropy averaged over every step and sequence (Arjovsky et al., 2016, Fig. 1).

    Shapes:
        - logits: ``(L, B, classes)``; targets: ``(L, B)`` long; returns a scalar.
    """
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def recall_accuracy(logits: Tensor, targets: Tensor, recall: int) -> Tensor:
    """Fraction of the ``recall`` to-be-recalled symbols predicted correctly, over the batch.

    This is the accuracy of the ReLSTM paper's Tables 1, 2 and 4: only the last ``recall``
    steps, where the symbols are to be reproduced, are scored (the blanks before them are
    trivial and would inflate the figure towards 100%).

    Shapes:
        - logits: ``(L, B, classes)``; targets: ``(L, B)`` long; returns a scalar in [0, 1].
    """
    predicted = logits[-recall:].argmax(dim=-1)
    return (predicted == targets[-recall:]).float().mean()


def mean_squared_error(prediction: Tensor, targets: Tensor) -> Tensor:
    """Mean squared error.

    Shapes:
        - prediction and targets: ``(B,)``; returns a scalar.
    """
    return F.mse_loss(prediction.float(), targets.float())


def holds_step(times: Tensor, marked: Tensor) -> Tensor:
    """Where a memory slot holds the state made at a marked step.

    Shapes:
        - times: ``(..., B, slots)`` long, the episode step each slot's state was made at (-1
          when empty), as in an attentive cell's ``slot_time`` trace or its state's ``*_time``
        - marked: ``(steps, B)`` bool; a slot made at or after ``steps`` is not marked
        - returns a bool tensor shaped like ``times``
    """
    valid = (times >= 0) & (times < marked.shape[0])
    by_step = marked.T.expand(*times.shape[:-1], marked.shape[0])  # (..., B, steps)
    return by_step.gather(-1, times.clamp(0, marked.shape[0] - 1)) & valid


def attention_on_steps(attention: Tensor, slot_time: Tensor, marked: Tensor) -> Tensor:
    """The attention weight on the slots holding a marked step's state (:func:`holds_step`),
    averaged over the traced steps and the batch: 0 when attention looks only elsewhere, 1
    when it looks only there.

    Shapes:
        - attention, slot_time: ``(L, B, slots)``, an attentive cell's traces of ``L`` steps
        - marked: ``(steps, B)`` bool
        - returns a scalar
    """
    return (attention * holds_step(slot_time, marked)).sum(-1).mean()


def held_share(times: Tensor, marked: Tensor) -> Tensor:
    """The share of the marked steps whose state some memory slot holds (:func:`holds_step`),
    per sequence, averaged over the batch: 1 when the memory holds every marked state, so
    that attention can read them all.

    Shapes:
        - times: ``(B, slots)`` long, the slots' steps at one step (an attentive cell's
          ``slot_time`` trace at that step)
        - marked: ``(steps, B)`` bool, with at least one marked step per sequence
        - returns a scalar
    """
    return (holds_step(times, marked).sum(-1) / marked.sum(0)).mean()

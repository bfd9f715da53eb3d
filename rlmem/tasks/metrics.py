"""The metrics of the papers: per-step cross-entropy, recall accuracy, and mean squared error."""

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

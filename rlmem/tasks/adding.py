"""The adding problem (Hochreiter & Schmidhuber, 1997; Arjovsky et al., 2016; TARNN and iRNN
papers, appendix "Addition Task").

Each step carries two features: a value drawn from U[0, 1] and an indicator. The indicator is 1
at exactly two steps, one drawn uniformly in the first half ``0 … ⌊T/2⌋-1`` and one in the second
half ``⌊T/2⌋ … T-1``, and 0 elsewhere. The target, read from the model's output at the last step,
is the sum of the two marked values. Predicting 1 regardless of the input scores the variance of
the sum of two independent U[0, 1] values, ``2/12 ≈ 0.167`` mean squared error.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from rlmem.tasks.base import Baseline, SequenceTask, TaskBatch, check_batch_size
from rlmem.tasks.metrics import mean_squared_error
from rlmem.tasks.registry import register_task


@register_task("adding")
class AddingTask(SequenceTask):
    """Output the sum of the two values marked by the indicator channel."""

    categorical: ClassVar[bool] = False

    @property
    def input_size(self) -> int:
        return 2

    @property
    def output_size(self) -> int:
        return 1

    def total_length(self, seq_len: int) -> int:
        return seq_len

    def min_seq_len(self) -> int:
        return 2

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> TaskBatch:
        check_batch_size(batch_size)
        self.check_seq_len(seq_len)
        device = generator.device
        values = torch.rand(seq_len, batch_size, generator=generator, device=device)
        half = seq_len // 2
        first = torch.randint(0, half, (batch_size,), generator=generator, device=device)
        second = torch.randint(half, seq_len, (batch_size,), generator=generator, device=device)
        indicator = torch.zeros_like(values)
        columns = torch.arange(batch_size, device=device)
        indicator[first, columns] = 1.0
        indicator[second, columns] = 1.0
        targets = values[first, columns] + values[second, columns]
        return TaskBatch(torch.stack([values, indicator], dim=-1), targets)

    def loss(self, outputs: Tensor, batch: TaskBatch) -> Tensor:
        return mean_squared_error(outputs[-1, :, 0], batch.targets)

    score = "mse"
    score_higher_is_better = False

    def metrics(self, outputs: Tensor, batch: TaskBatch) -> dict[str, Tensor]:
        return {"mse": mean_squared_error(outputs[-1, :, 0], batch.targets).detach()}

    def baseline(self, seq_len: int) -> Baseline:
        """Predict 1, the mean of the sum: MSE = Var(U1 + U2) = 2/12 ≈ 0.167."""
        return Baseline("mse", 2 / 12, "predict 1: Var(U[0,1] + U[0,1]) = 1/6 ≈ 0.167")

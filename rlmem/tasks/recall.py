"""What copy and denoise share: the alphabet, the output layout, the scoring and the baseline.

Both tasks feed ``L = T + 2·recall`` symbols (``T + 20`` with the papers' ``recall = 10``) and
ask for ``T + recall`` blanks followed by the ``recall`` data symbols in their input order. They
differ only in where the data symbols sit in the input (see :mod:`rlmem.tasks.copy` and
:mod:`rlmem.tasks.denoise`).

Symbols: ``0 … alphabet-1`` are data (``a_0 … a_7`` in the papers), ``alphabet`` is the blank
(``a_8``) and ``alphabet + 1`` the delimiter (``a_9``).
"""

from __future__ import annotations

import abc
import math
from collections.abc import Mapping
from typing import ClassVar

import torch
from torch import Tensor

from rlmem.tasks.base import Baseline, SequenceTask, TaskBatch, check_batch_size
from rlmem.tasks.metrics import (
    attention_on_steps,
    held_share,
    recall_accuracy,
    sequence_cross_entropy,
)


class RecallTask(SequenceTask, abc.ABC):
    """A categorical task whose last ``recall`` targets are the data symbols, in order.

    Args:
        alphabet: number of data symbols (8 in Arjovsky et al., 2016).
        recall: number of symbols to remember and reproduce (10 in the papers).
    """

    categorical: ClassVar[bool] = True

    def __init__(self, *, alphabet: int = 8, recall: int = 10) -> None:
        for key, value, low in (("alphabet", alphabet, 2), ("recall", recall, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"task {self.name!r}: {key} must be an int >= {low}, "
                                 f"got {value!r}")
        self.alphabet = alphabet
        self.recall = recall

    @property
    def blank(self) -> int:
        """The blank symbol (``a_8`` for the papers' alphabet of 8)."""
        return self.alphabet

    @property
    def delimiter(self) -> int:
        """The symbol that asks for the output (``a_9``)."""
        return self.alphabet + 1

    @property
    def input_size(self) -> int:
        return self.alphabet + 2

    @property
    def output_size(self) -> int:
        return self.alphabet + 2

    def total_length(self, seq_len: int) -> int:
        return seq_len + 2 * self.recall

    def min_seq_len(self) -> int:
        return 1

    def delimiter_step(self, seq_len: int) -> int:
        """Index of the delimiter: ``T + recall - 1``; the output starts the step after it."""
        return seq_len + self.recall - 1

    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> TaskBatch:
        check_batch_size(batch_size)
        self.check_seq_len(seq_len)
        device = generator.device
        symbols = torch.randint(0, self.alphabet, (self.recall, batch_size), generator=generator,
                                device=device)
        length = self.total_length(seq_len)
        inputs = torch.full((length, batch_size), self.blank, dtype=torch.long, device=device)
        positions = self.data_positions(batch_size, seq_len, generator)
        inputs.scatter_(0, positions, symbols)
        inputs[self.delimiter_step(seq_len)] = self.delimiter
        targets = torch.full_like(inputs, self.blank)
        targets[-self.recall:] = symbols
        return TaskBatch(inputs, targets)

    @abc.abstractmethod
    def data_positions(self, batch_size: int, seq_len: int,
                       generator: torch.Generator) -> Tensor:
        """Increasing input steps of the ``recall`` data symbols, all before the delimiter.

        Shapes:
            - returns ``(recall, B)`` long on ``generator.device``.
        """

    def loss(self, outputs: Tensor, batch: TaskBatch) -> Tensor:
        return sequence_cross_entropy(outputs, batch.targets)

    score = "accuracy"
    score_higher_is_better = True

    def metrics(self, outputs: Tensor, batch: TaskBatch) -> dict[str, Tensor]:
        return {"ce": sequence_cross_entropy(outputs, batch.targets).detach(),
                "accuracy": recall_accuracy(outputs, batch.targets, self.recall).detach()}

    def traced_steps(self) -> int:
        return self.recall

    def trace_metrics(self, traces: Mapping[str, Tensor], batch: TaskBatch) -> dict[str, Tensor]:
        """For a cell that traces ``attention`` and ``slot_time`` (relstm, relrnn, memlstm):

        - ``data_in_memory``: the share of the data symbols whose state the memory holds at
          the first output step (:func:`~rlmem.tasks.metrics.held_share`). A symbol missing
          there can only be recalled through the recurrence; for relstm it is one that R's
          screening let go.
        - ``attention_on_data``: at the ``recall`` output steps, the attention weight on the
          slots that hold a data symbol's state (:func:`~rlmem.tasks.metrics.
          attention_on_steps`). A model that recalls by reading its memory puts it near 1; one
          that recalls through its recurrence alone leaves it near 0, whatever its accuracy.
        """
        if "attention" not in traces or "slot_time" not in traces:
            return {}
        data = batch.inputs < self.alphabet  # (L, B): True at a data symbol's step
        slot_time = traces["slot_time"][-self.recall:]
        return {"data_in_memory": held_share(slot_time[0], data),
                "attention_on_data": attention_on_steps(traces["attention"][-self.recall:],
                                                        slot_time, data)}

    def baseline(self, seq_len: int) -> Baseline:
        """The memoryless strategy: blank for the first ``T + recall`` steps, then a uniform
        guess over the alphabet. Cross-entropy ``recall·log(alphabet) / (T + 2·recall)``, i.e.
        ``10·log(8)/(T+20)`` in the papers; its recall accuracy is ``1/alphabet``."""
        value = self.recall * math.log(self.alphabet) / self.total_length(seq_len)
        return Baseline("ce", value,
                        f"memoryless: {self.recall}·log({self.alphabet})/(T+{2 * self.recall})"
                        f" = {value:.4f}, accuracy {1 / self.alphabet:.1%}")

    def describe(self) -> str:
        return f"{self.name} (alphabet {self.alphabet}, recall {self.recall})"

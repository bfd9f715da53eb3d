"""What a supervised sequence task is: a seeded on-device generator, a loss, metrics, a baseline.

A task draws a batch of sequences of a given length ``T`` (the delay of the memory problem) with
a :class:`torch.Generator`; the batch lives on that generator's device, so ``device=cuda`` makes
the data on the GPU and nothing is copied from the host. The model (:mod:`rlmem.tasks.model`)
emits one output per input step; the task says which of them are scored and how.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor


@dataclass(frozen=True)
class TaskBatch:
    """One batch of a task, time-major like the cells.

    Attributes:
        inputs: ``(L, B)`` long symbols for categorical tasks, ``(L, B, input_size)`` float
            otherwise; ``L`` is :meth:`SequenceTask.total_length` of ``T``.
        targets: ``(L, B)`` long for the categorical tasks (a target at every step), ``(B,)``
            float for a task scored at the last step only (adding).
    """

    inputs: Tensor
    targets: Tensor

    @property
    def length(self) -> int:
        """Number of time steps ``L`` fed to the model."""
        return int(self.inputs.shape[0])

    @property
    def batch_size(self) -> int:
        return int(self.inputs.shape[1])


@dataclass(frozen=True)
class Baseline:
    """The naive, memoryless score of a task at one ``T``, and how it is derived."""

    metric: str
    """The metric it is a baseline for (``ce`` or ``mse``)."""
    value: float
    """Its value."""
    rule: str
    """The formula and the strategy that attains it, for the log and the figures."""


class SequenceTask(abc.ABC):
    """Base class of the supervised tasks: subclasses define the generator and the scoring.

    Attributes:
        name: registry name (set by :func:`rlmem.tasks.registry.register_task`).
        categorical: inputs are symbols (one-hot encoded by the model) rather than features.
    """

    name: ClassVar[str] = ""
    categorical: ClassVar[bool]

    @property
    @abc.abstractmethod
    def input_size(self) -> int:
        """Features per step after encoding (the number of symbols when categorical)."""

    @property
    @abc.abstractmethod
    def output_size(self) -> int:
        """Outputs per step of the model's readout (classes, or 1 for regression)."""

    @abc.abstractmethod
    def total_length(self, seq_len: int) -> int:
        """Number of steps ``L`` of a sequence of delay ``seq_len`` (``T + 20`` for copy)."""

    @abc.abstractmethod
    def min_seq_len(self) -> int:
        """The smallest ``T`` for which the task is defined."""

    def check_seq_len(self, seq_len: int, key: str = "seq_len") -> None:
        """Raise a :class:`ValueError` naming ``key`` when ``seq_len`` is out of range."""
        if not isinstance(seq_len, int) or isinstance(seq_len, bool) \
                or seq_len < self.min_seq_len():
            raise ValueError(f"{key}={seq_len!r}: task {self.name!r} needs an int "
                             f">= {self.min_seq_len()}")

    @abc.abstractmethod
    def sample(self, batch_size: int, seq_len: int, generator: torch.Generator) -> TaskBatch:
        """Draw a batch on ``generator.device``; the same generator state gives the same batch."""

    @abc.abstractmethod
    def loss(self, outputs: Tensor, batch: TaskBatch) -> Tensor:
        """The differentiable training loss (the metric the papers plot).

        Shapes:
            - outputs: ``(L, B, output_size)``; returns a scalar.
        """

    @abc.abstractmethod
    def metrics(self, outputs: Tensor, batch: TaskBatch) -> dict[str, Tensor]:
        """Detached scalar metrics as the papers report them (``ce``/``accuracy`` or ``mse``).

        Shapes:
            - outputs: ``(L, B, output_size)``; returns 0-dim tensors.
        """

    def traced_steps(self) -> int:
        """How many of a sequence's last steps :meth:`trace_metrics` reads (0: none), so that
        an evaluation keeps the cell's traces of those steps only."""
        return 0

    def trace_metrics(self, traces: Mapping[str, Tensor], batch: TaskBatch) -> dict[str, Tensor]:
        """Detached scalar metrics read from a cell's traces of the last :meth:`traced_steps`
        steps (where its attention looks, for example); none by default, and none for a cell
        that does not trace what a metric needs.

        Shapes:
            - each trace: ``(traced_steps, B, ...)``; returns 0-dim tensors.
        """
        return {}

    @abc.abstractmethod
    def baseline(self, seq_len: int) -> Baseline:
        """The score of the best strategy without memory at delay ``seq_len``."""

    score: ClassVar[str]
    """The metric the papers' tables report and a ``target`` is read on (``accuracy``,
    ``mse``)."""
    score_higher_is_better: ClassVar[bool]
    """Whether a larger :attr:`score` is better."""

    def reached(self, value: float, target: float) -> bool:
        """Whether ``value`` of :attr:`score` meets ``target``."""
        return value >= target if self.score_higher_is_better else value <= target

    def describe(self) -> str:
        """One line for the run log."""
        return self.name


def check_batch_size(batch_size: int) -> None:
    """Raise a :class:`ValueError` unless ``batch_size`` is a positive int."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")

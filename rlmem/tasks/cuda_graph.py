"""A supervised iteration's forward and backward captured once as a CUDA graph, then replayed.

The cells' loops launch a few dozen small kernels per step; on a GPU, a batch of 128 copy
sequences (T = 100) keeps each kernel busy for a microsecond or two, and the host's launches,
not the arithmetic, set the pace. A CUDA graph records the launches of one iteration (forward,
task loss, aux losses, backward, gradient clipping) once; every later iteration copies its
batch into the graph's input tensors and replays the whole recording in one call
(:class:`torch.cuda.CUDAGraph`). The optimizer steps outside the graph, after the same
finiteness check as the eager step, so a non-finite loss is still never applied.

A graph replays exactly what it recorded, so it is used only where the recording stays right:

- on CUDA, at a fixed sequence length (no ``seq_len_min`` curriculum), without autocast;
- for a cell with no training schedule (one that does not override
  :meth:`~rlmem.cells.base.Cell.anneal`: SA-RNN's slope would be frozen in the recording);
- from the zero state and without resets, which a supervised batch always is; the cells'
  loops are told so (:func:`~rlmem.cells.host_reads.fresh_chunks`) instead of reading the
  device, which capture forbids.

The first iteration runs eagerly with every host read, then is captured and replayed on the
same batch; the two must give the same loss, gradient norm and gradients (``torch.allclose``,
float rounding of atomic sums aside), else the run warns and stays eager. So does a capture that
fails (a cell whose loop reads the device). ``RLMEM_NO_CUDA_GRAPH=1`` turns graphs off.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from rlmem.cells.base import Aux, Cell
from rlmem.cells.host_reads import fresh_chunks
from rlmem.tasks.amp import autocast
from rlmem.tasks.base import SequenceTask, TaskBatch
from rlmem.tasks.model import SequenceModel

DISABLE_VARIABLE = "RLMEM_NO_CUDA_GRAPH"
WARMUP = 3
"""Eager iterations on a side stream before capture (PyTorch's advice: lazy initialisations,
such as cuDNN's workspace, happen there and not in the recording)."""


@dataclass(frozen=True)
class Computed:
    """One iteration's results before the optimizer step (detached)."""
    loss: Tensor
    grad_norm: Tensor
    outputs: Tensor
    aux: Aux


def compute(model: SequenceModel, task: SequenceTask, batch: TaskBatch, max_norm: float,
            amp: bool = False) -> Computed:
    """Forward and task loss (under bf16 autocast with ``amp``), plus the cell's aux losses;
    backward into ``.grad``; gradient clipping to ``max_norm``."""
    with autocast(batch.inputs.device, amp):
        outputs, result = model(batch.inputs)
        task_loss = task.loss(outputs, batch)
    loss = task_loss + result.aux.total_loss()
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return Computed(loss.detach(), grad_norm.detach(), outputs.detach(), result.aux)


def graph_refusal(model: SequenceModel, device: torch.device, fixed_length: bool,
                  amp: bool) -> str | None:
    """Why a graph cannot record this run's iterations, or ``None`` if it can."""
    if device.type != "cuda":
        return "not on CUDA"
    if os.environ.get(DISABLE_VARIABLE) == "1":
        return f"{DISABLE_VARIABLE}=1"
    if not fixed_length:
        return "the sequence length varies (seq_len_min)"
    if amp:
        return "amp=true"
    if type(model.cell).anneal is not Cell.anneal:
        return f"{type(model.cell).__name__} follows a schedule (anneal)"
    return None


class GraphedLoss:
    """:func:`compute` on one batch shape, recorded as a CUDA graph and replayed.

    The gradients live in the parameters' ``.grad`` tensors the graph writes; they must stay
    those tensors, so nothing may set them to ``None`` (``zero_grad(set_to_none=True)``) once
    the graph exists. Build with :meth:`capture`, which returns ``None`` (and warns) where the
    recording fails or disagrees with the eager iteration.

    Shapes:
        - every batch: the shapes and dtypes of the batch given to :meth:`capture`
    """

    def __init__(self, graph: torch.cuda.CUDAGraph, static: TaskBatch, computed: Computed,
                 cell: Cell) -> None:
        self.graph = graph
        self.static = static
        self.computed = computed
        self.cell = cell

    @classmethod
    def capture(cls, model: SequenceModel, task: SequenceTask, batch: TaskBatch,
                max_norm: float) -> tuple[GraphedLoss | None, Computed]:
        """Run ``batch`` eagerly (the iteration's result), then record and check the graph.

        Returns the graph (``None`` where it cannot be used) and the eager result of
        ``batch``, with its gradients in ``.grad``.
        """
        parameters = [p for p in model.parameters() if p.requires_grad]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP):
                model.zero_grad(set_to_none=True)
                eager = compute(model, task, batch, max_norm)
        torch.cuda.current_stream().wait_stream(side)
        eager_grads = [p.grad.clone() if p.grad is not None else None for p in parameters]
        static = TaskBatch(batch.inputs.clone(), batch.targets.clone())
        model.zero_grad(set_to_none=True)  # the graph allocates the .grad tensors it writes
        graph = torch.cuda.CUDAGraph()
        try:
            with fresh_chunks(), torch.cuda.graph(graph):
                recorded = compute(model, task, static, max_norm)
            graph.replay()
        except RuntimeError as error:
            return cls._eager(model, parameters, eager, eager_grads,
                              f"its capture failed ({str(error).splitlines()[0][:200]})")
        same = (torch.allclose(recorded.loss, eager.loss)
                and torch.allclose(recorded.grad_norm, eager.grad_norm)
                and all((g is None) == (p.grad is None)
                        and (g is None or p.grad is None or torch.allclose(p.grad, g))
                        for p, g in zip(parameters, eager_grads, strict=True)))
        if not same:
            return cls._eager(model, parameters, eager, eager_grads,
                              "its replay disagrees with the eager iteration")
        return cls(graph, static, recorded, model.cell), eager

    @staticmethod
    def _eager(model: SequenceModel, parameters: list[torch.nn.Parameter], eager: Computed,
               grads: list[Tensor | None], reason: str) -> tuple[None, Computed]:
        warnings.warn(f"rlmem: the supervised iterations run without a CUDA graph: {reason}. "
                      f"Each kernel is launched from Python instead (slower, same results).",
                      RuntimeWarning, stacklevel=3)
        model.zero_grad(set_to_none=True)
        for parameter, grad in zip(parameters, grads, strict=True):
            parameter.grad = grad
        return None, eager

    def __call__(self, batch: TaskBatch) -> Computed:
        """Copy ``batch`` into the graph's inputs and replay; the results are overwritten by
        the next call."""
        self.static.inputs.copy_(batch.inputs)
        self.static.targets.copy_(batch.targets)
        self.graph.replay()
        recorded = self.computed
        traces = recorded.aux.traces
        # An Aux keeps its diagnostics once worked out: each replay's need a new one.
        aux = Aux(losses=recorded.aux.losses, traces=traces,
                  diagnostics=lambda: {key: value.detach() for key, value
                                       in self.cell.diagnostics(traces).items()})
        return Computed(recorded.loss, recorded.grad_norm, recorded.outputs, aux)

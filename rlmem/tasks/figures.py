"""Figures of a supervised run, written as PNG next to it.

- ``learning_curve.png``: the training loss (and recall accuracy) against the naive baseline.
- ``attention.png``: the ReLSTM/MemLSTM attention heatmap, state ``t`` (row) attending to the
  state of step ``t'`` (column), as in Fig. 1, 5 and 6 of the ReLSTM paper. Needs the cell's
  traces ``attention`` ``(L, B, slots)`` and ``slot_time`` ``(L, B, slots)`` (the step whose
  state each slot holds; negative for an empty slot). :func:`attention_from_checkpoint` draws
  it after the fact at another delay (``attention_T5000.png``: the transfer of Table 1).
- ``update_pattern.png``: SA-RNN's update gates, dimensions × time (SA-RNN Fig. 3); trace
  ``update`` ``(L, B, H)``.
- ``beta.png``: TARNN's β over time under the input (TARNN Fig. 3); trace ``beta``
  ``(L, B, H)``.

A figure whose trace the cell does not produce is skipped, so every cell can call
:func:`write_figures`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from rlmem.runs.progress import read_progress
from rlmem.tasks.base import Baseline, SequenceTask, TaskBatch
from rlmem.tasks.model import SequenceModel
from rlmem.tasks.saved import load_saved_model

MAX_PIXELS = 240
"""The attention heatmap has at most this many rows and columns: a longer sequence is pooled in
square blocks of steps, each at least two screen pixels wide, so the few attended states of a
T = 5000 sequence stay visible (drawn one pixel per step, most would fall between pixels)."""


def _read_progress(path: Path) -> dict[str, np.ndarray]:
    rows = read_progress(path)
    return {key: np.array([row.number(key, math.nan) for row in rows])
            for key in (rows[0].values if rows else [])}


def learning_curve(progress_csv: Path, baseline: Baseline, seq_len: int, out: Path,
                   title: str = "") -> Path | None:
    """Training and evaluation ``baseline.metric`` over iterations, with the baseline as a line;
    a second panel with recall accuracy when the task reports it."""
    if not progress_csv.exists():
        return None
    data = _read_progress(progress_csv)
    if "iteration" not in data or len(data["iteration"]) == 0:
        return None
    metric = baseline.metric
    has_accuracy = "train/accuracy" in data
    fig = Figure(figsize=(11 if has_accuracy else 6, 4), layout="constrained")
    axes = fig.subplots(1, 2 if has_accuracy else 1, squeeze=False)
    iterations = data["iteration"]
    ax = axes[0, 0]
    ax.plot(iterations, data[f"train/{metric}"], label=f"train {metric}", lw=1)
    eval_key = f"eval/{metric}@T{seq_len}"
    if eval_key in data:
        mask = np.isfinite(data[eval_key])
        ax.plot(iterations[mask], data[eval_key][mask], "o-", ms=3, label=f"eval {metric}")
    ax.axhline(baseline.value, color="k", ls="--", lw=1, label=f"baseline {baseline.value:.4f}")
    ax.set_xlabel("iteration")
    ax.set_ylabel(metric)
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title(title or f"{metric} vs the naive baseline")
    if has_accuracy:
        ax = axes[0, 1]
        ax.plot(iterations, 100 * data["train/accuracy"], label="train", lw=1)
        accuracy_keys = sorted((key for key in data if key.startswith("eval/accuracy@T")),
                               key=lambda key: int(key.rsplit("T", 1)[1]))
        for key in accuracy_keys:
            mask = np.isfinite(data[key])
            ax.plot(iterations[mask], 100 * data[key][mask], "o-", ms=3,
                    label=f"eval T={key.rsplit('T', 1)[1]}")
        ax.set_xlabel("iteration")
        ax.set_ylabel("symbols recalled (%)")
        ax.set_ylim(0, 101)
        ax.legend(fontsize=8)
        ax.set_title("recall accuracy")
    fig.savefig(out, dpi=120)
    return out


def attention_matrix(attention: Tensor, slot_time: Tensor, block: int = 1) -> np.ndarray:
    """The matrix of attention paid at step ``t`` to the state of step ``t'``.

    With ``block > 1``, entry ``(i, j)`` covers the steps ``t`` of row block ``i`` and ``t'`` of
    column block ``j``: the attention those steps paid to states of block ``j``, averaged over
    the steps of block ``i`` (so a row still sums to the attention paid, as at ``block = 1``).

    Shapes:
        - attention, slot_time: ``(L, slots)`` for one sequence; returns
          ``(⌈L / block⌉, ⌈L / block⌉)``.
    """
    steps = attention.shape[0]
    size = math.ceil(steps / block)
    matrix = torch.zeros(size, size, dtype=torch.float32)
    times = slot_time.long().cpu()
    valid = (times >= 0) & (times < steps)
    rows = torch.arange(steps).unsqueeze(1).expand_as(times)
    matrix.index_put_((rows[valid] // block, times[valid] // block),
                      attention.float().cpu()[valid], accumulate=True)
    steps_per_block = torch.bincount(torch.arange(steps) // block, minlength=size)
    return (matrix / steps_per_block.unsqueeze(1)).numpy()


def _input_strip(ax: Axes, batch: TaskBatch, item: int) -> None:
    """The input of one sequence as a strip over time (symbols or the feature channels)."""
    inputs = batch.inputs[:, item].detach().float().cpu().numpy()
    image = inputs[None, :] if inputs.ndim == 1 else inputs.T
    ax.imshow(image, aspect="auto", interpolation="nearest", cmap="viridis")
    ax.set_yticks([])
    ax.set_ylabel("input")


def attention_figure(traces: dict[str, Tensor], batch: TaskBatch, out: Path,
                     item: int = 0) -> Path | None:
    """The attention heatmap, or ``None`` without ``attention``/``slot_time`` traces; pooled in
    blocks of steps beyond :data:`MAX_PIXELS` steps."""
    if "attention" not in traces or "slot_time" not in traces:
        return None
    steps = traces["attention"].shape[0]
    block = math.ceil(steps / MAX_PIXELS)
    matrix = attention_matrix(traces["attention"][:, item].cpu(),
                              traces["slot_time"][:, item].cpu(), block)
    fig = Figure(figsize=(6, 6.6), layout="constrained")
    strip, ax = fig.subplots(2, 1, height_ratios=(1, 12), sharex=True)
    _input_strip(strip, batch, item)
    shown = np.ma.masked_where(matrix <= 0, matrix)
    end = matrix.shape[0] * block - 0.5
    image = ax.imshow(shown, aspect="auto", interpolation="nearest", cmap="magma_r",
                      origin="upper", extent=(-0.5, end, end, -0.5))
    fig.colorbar(image, ax=[strip, ax], fraction=0.04, label="attention weight")
    ax.set_xlabel("attended state (time step)")
    ax.set_ylabel("attending step")
    pooled = "" if block == 1 else f", {block}×{block}-step blocks"
    strip.set_title(f"attention over memory ({steps} steps{pooled})")
    fig.savefig(out, dpi=120)
    return out


def _dims_by_time(trace_name: str, label: str, title: str,
                  cmap: str) -> Callable[[dict[str, Tensor], TaskBatch, Path, int], Path | None]:
    def figure(traces: dict[str, Tensor], batch: TaskBatch, out: Path,
               item: int = 0) -> Path | None:
        if trace_name not in traces:
            return None
        values = traces[trace_name][:, item].float().cpu()
        if values.dim() != 2:
            return None
        fig = Figure(figsize=(8, 6), layout="constrained")
        strip, ax, mean_ax = fig.subplots(3, 1, height_ratios=(1, 8, 3), sharex=True)
        _input_strip(strip, batch, item)
        image = ax.imshow(values.T.numpy(), aspect="auto", interpolation="nearest", cmap=cmap,
                          extent=(-0.5, values.shape[0] - 0.5, values.shape[1] - 0.5, -0.5))
        fig.colorbar(image, ax=[ax, mean_ax], fraction=0.03, label=label)
        ax.set_ylabel("hidden dimension")
        mean_ax.plot(np.arange(values.shape[0]), values.mean(dim=1).numpy(), lw=1)
        mean_ax.set_ylabel(f"mean {label}")
        mean_ax.set_xlabel("time step")
        strip.set_title(title)
        fig.savefig(out, dpi=120)
        return out

    figure.__doc__ = f"{title}, or ``None`` without the ``{trace_name}`` trace."
    return figure


update_pattern_figure = _dims_by_time("update", "update", "SA-RNN update pattern (1 = update)",
                                      "Greys")
beta_figure = _dims_by_time("beta", "β", "TARNN β over time", "viridis")

TRACE_FIGURES: dict[str, Callable[[dict[str, Tensor], TaskBatch, Path, int], Path | None]] = {
    "attention.png": attention_figure,
    "update_pattern.png": update_pattern_figure,
    "beta.png": beta_figure,
}
"""The trace figures, by file name; each skips itself when its trace is absent."""


@torch.no_grad()
def write_figures(run_dir: Path, model: SequenceModel, task: SequenceTask, seq_len: int,
                  generator: torch.Generator, title: str = "") -> list[Path]:
    """Write every figure the run's cell supports into ``run_dir``; returns their paths."""
    written = []
    curve = learning_curve(run_dir / "progress.csv", task.baseline(seq_len), seq_len,
                           run_dir / "learning_curve.png", title)
    if curve is not None:
        written.append(curve)
    was_training = model.training
    model.eval()
    try:
        batch = task.sample(1, seq_len, generator)
        _, result = model(batch.inputs)
    finally:
        model.train(was_training)
    for name, figure in TRACE_FIGURES.items():
        path = figure(result.aux.traces, batch, run_dir / name, 0)
        if path is not None:
            written.append(path)
    return written


@torch.no_grad()
def attention_from_checkpoint(run_dir: Path, seq_len: int, out: Path | None = None
                              ) -> Path | None:
    """The attention heatmap of a supervised run's saved weights on one sequence of delay
    ``seq_len``, e.g. the T = 5000 of transfer-copy; ``None`` when the cell has no attention.

    The checkpoint loads with ``weights_only=True``. A delay other than the training one uses
    the run's ``eval_memory`` (MemLSTM's capacity), as its transfer evaluation does; the
    sequence is drawn from a generator seeded with the run's seed. Written to
    ``<run_dir>/attention_T<seq_len>.png`` unless ``out`` is given.
    """
    saved = load_saved_model(run_dir, seq_len)
    batch = saved.task.sample(1, seq_len, torch.Generator().manual_seed(saved.seed))
    _, result = saved.model(batch.inputs)
    return attention_figure(result.aux.traces, batch,
                            out or run_dir / f"attention_T{seq_len}.png")

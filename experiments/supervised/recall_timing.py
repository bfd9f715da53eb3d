"""When does a copy model recall? Its outputs at every step, on the held-out batches.

    python -m experiments.supervised.recall_timing                      # every transfer-copy run
    python -m experiments.supervised.recall_timing --runs runs/<preset>/seed0 --lengths 100 200

Transfer-copy asks for the 10 symbols right after the delimiter, which comes at step T + 9. A
model can time its recall in two ways that are the same at the training T: by the delimiter,
or by counting steps from the start. The second fails at every other T, and this script tells
them apart. For each saved model (its ``checkpoint.pt``) and delay T, on the run's own held-out
batch (the one its evaluation uses), it reports:

- *recall accuracy*, as in ``RESULTS.md``;
- *blank at recall*: the share of the 10 recall positions where the model outputs the blank;
- *symbols before the delimiter*: the share of sequences with a data symbol predicted before
  step T + 9, where every target is blank;
- *first symbol*: the median step of a sequence's first predicted data symbol, against the
  step where recall starts (T + 10);
- *data symbols in memory* (cells with attention): the share of the 10 data symbols whose state
  the memory holds at the first recall step (``data_in_memory``,
  :meth:`~rlmem.tasks.recall.RecallTask.trace_metrics`), what the recall can attend to. On
  copy that memory is ReLSTM's relevant set R (S holds blanks by then): Algorithm 1 starts R
  with the first ρ states (the symbols), and a later state with a higher relevance replaces
  one;
- *attention on symbols at recall* (the attentive cells): the attention weight the recall steps
  put on the memory slots that hold a data symbol's state, averaged over the 10 recall steps
  (the rest goes to blank states, and to the delimiter's). It tells a read-out that looks
  elsewhere from a memory that lost the symbols;
- *recall of the symbols held* and *of the symbols lost*: recall accuracy on the symbols whose
  state the memory holds at recall, and on the others, which only the recurrence can carry.

A model that counts emits its symbols near step 110 (its training T + 10) at every T.

A second table follows the memory of the copy runs with attention along one sequence: on the
held-out batch of the longest T, the share of the 10 data symbols whose state the memory holds
at step 20 (after the screening of the symbols' own states: with ν = 10 the last symbol leaves
S at step 19) and at the step where recall would start for each T (T + 10, every input up to it
a blank). It tells the symbols the screening never kept from those it let go later, during
delays longer than the training one. Writes ``RECALL_TIMING.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from experiments.supervised.rows import HERE, ROWS, RUNS, Task
from rlmem.runs import CHECKPOINT_NAME
from rlmem.tasks import TaskBatch, held_out
from rlmem.tasks.held_out import run_in_chunks
from rlmem.tasks.metrics import held_share
from rlmem.tasks.recall import RecallTask
from rlmem.tasks.saved import SavedModel, load_saved_model

LENGTHS = (100, 200, 400, 2000, 5000)
SCREENED_BY = 20
"""The step by which the copy symbols' own states have left a short-term buffer of ν = 10."""


@dataclass(frozen=True)
class Timing:
    seq_len: int
    accuracy: float
    blank_at_recall: float
    early_symbols: float
    first_symbol: float
    """Median step of the first predicted data symbol (NaN if no sequence has one)."""
    data_in_memory: float
    """Share of the data symbols whose state the memory holds at the first recall step (NaN
    without attention)."""
    attention_on_symbols: float
    """Mean attention weight of a recall step on slots holding a data symbol's state (NaN
    without screened memory)."""
    recall_of_held: float
    """Recall accuracy on the symbols whose state the memory holds at the first recall step
    (NaN without attention, or when it holds none)."""
    recall_of_missing: float
    """Recall accuracy on the symbols it does not hold (NaN likewise)."""


def recall_task(saved: SavedModel, run_dir: Path) -> RecallTask:
    if not isinstance(saved.task, RecallTask):
        raise ValueError(f"{run_dir} is a {saved.task.name} run; recall timing needs copy or "
                         "denoise")
    return saved.task


def held_out_batch(saved: SavedModel, task: RecallTask, seq_len: int) -> TaskBatch:
    """The batch the run's own evaluation at ``seq_len`` uses."""
    return held_out.held_out_batch(task, int(saved.config["eval_batch_size"]), saved.seed,
                                   seq_len, torch.device("cpu"))


@torch.no_grad()
def timing(run_dir: Path, seq_len: int) -> Timing:
    """The recall timing of ``run_dir``'s saved model at delay ``seq_len``."""
    saved = load_saved_model(run_dir, seq_len)
    task = recall_task(saved, run_dir)
    batch = held_out_batch(saved, task, seq_len)
    delimiter = task.delimiter_step(seq_len)
    before, state, _ = run_in_chunks(saved.model, batch.inputs[:delimiter + 1])
    after, result = saved.model(batch.inputs[delimiter + 1:], state)  # the recall steps
    traced = task.trace_metrics(result.aux.traces, batch)
    outputs = torch.cat([before, after.float()])
    predicted = outputs.argmax(-1)  # (L, B)
    length = task.total_length(seq_len)
    recall = predicted[length - task.recall:]
    symbol = predicted != task.blank
    steps = torch.arange(length).unsqueeze(1).expand_as(predicted)
    first = torch.where(symbol, steps, length).min(0).values.float()
    first = first[first < length]
    held, missing = recall_by_memory(task, batch.inputs[:delimiter], result.aux.traces,
                                     recall, batch.targets[length - task.recall:])
    return Timing(
        seq_len,
        accuracy=float(task.metrics(outputs, batch)["accuracy"]),
        blank_at_recall=float((recall == task.blank).float().mean()),
        early_symbols=float(symbol[:delimiter].any(0).float().mean()),
        first_symbol=float(first.median()) if len(first) else float("nan"),
        data_in_memory=float(traced.get("data_in_memory", math.nan)),
        attention_on_symbols=float(traced.get("attention_on_data", math.nan)),
        recall_of_held=held, recall_of_missing=missing)


def recall_by_memory(task: RecallTask, before: Tensor, traces: dict[str, Tensor],
                     predicted: Tensor, targets: Tensor) -> tuple[float, float]:
    """Recall accuracy on the symbols whose state the memory holds at the first recall step,
    and on the others (NaN for a side with no symbol, and both without a ``slot_time``
    trace). The k-th recall target is the k-th data symbol of the input.

    Shapes: before ``(steps, B)``, the inputs before the delimiter; predicted and targets
    ``(recall, B)``; traces from the recall steps.
    """
    if "slot_time" not in traces:
        return math.nan, math.nan
    data = (before < task.alphabet).T  # (B, steps)
    steps = data.nonzero()[:, 1].view(data.shape[0], task.recall)  # each symbol's step, in order
    held = (traces["slot_time"][0].unsqueeze(1) == steps.unsqueeze(2)).any(-1)  # (B, recall)
    correct = (predicted == targets).T.float()

    def accuracy_on(side: Tensor) -> float:
        return float(correct[side].mean()) if side.any() else math.nan

    return accuracy_on(held), accuracy_on(~held)


@torch.no_grad()
def held_along(run_dir: Path, steps: list[int], seq_len: int) -> list[float] | None:
    """The share of the data symbols whose state the memory holds at each of ``steps`` (each
    at or after :data:`SCREENED_BY`, increasing), on the held-out batch of ``seq_len``; None for
    a run that is not copy (denoise's symbols may come after step 20) or a model without a
    ``slot_time`` trace."""
    saved = load_saved_model(run_dir, seq_len)
    task = recall_task(saved, run_dir)
    if task.name != "copy":
        return None
    batch = held_out_batch(saved, task, seq_len)
    data = batch.inputs[:SCREENED_BY] < task.alphabet  # copy's symbols all come before
    state, start, shares = None, 0, []
    for step in steps:
        run = run_in_chunks(saved.model, batch.inputs[start:step + 1], state, traced=1)
        if "slot_time" not in run.traces:
            return None
        shares.append(float(held_share(run.traces["slot_time"][-1], data)))
        state, start = run.state, step + 1
    return shares


def share(value: float) -> str:
    """A share as a percentage, or a dash where the cell has no such quantity (NaN)."""
    return "—" if math.isnan(value) else f"{value:.1%}"


def default_runs() -> list[Path]:
    return sorted(checkpoint.parent for row in ROWS if row.task is Task.transfer_copy
                  for checkpoint in (RUNS / row.preset).glob(f"seed*/{CHECKPOINT_NAME}"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", type=Path, default=None,
                        help="run directories with a checkpoint.pt (default: every "
                             "transfer-copy run that has one)")
    parser.add_argument("--lengths", nargs="+", type=int, default=list(LENGTHS))
    parser.add_argument("--out", type=Path, default=HERE / "RECALL_TIMING.md")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runs = args.runs or default_runs()
    if not runs:
        parser.error("no run with a checkpoint.pt; give --runs")
    missing = [run for run in runs if not (run / CHECKPOINT_NAME).is_file()]
    if missing:
        parser.error(f"no {CHECKPOINT_NAME} in {', '.join(map(str, missing))}")
    lines = ["# When the copy models recall", "",
             f"Generated by `python -m experiments.supervised.recall_timing` (see its docstring)"
             f" from each run's latest `{CHECKPOINT_NAME}`, on the run's held-out batch per T "
             "(its `eval_batch_size` sequences). Recall starts at step T + 10.", "",
             "| run | iteration | T | recall accuracy | blank at recall | symbols before the "
             "delimiter | first symbol (median step) | recall starts at | data symbols in "
             "memory at recall | attention on symbols at recall | recall of the symbols held "
             "| recall of the symbols lost |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for run in runs:
        iteration = load_saved_model(run).iteration
        for seq_len in args.lengths:
            t = timing(run, seq_len)
            print(f"{run} T={seq_len}: {t}", flush=True)
            lines.append(
                f"| {run.relative_to(HERE) if run.is_relative_to(HERE) else run} | {iteration} "
                f"| {seq_len} | {t.accuracy:.1%} | {t.blank_at_recall:.1%} | "
                f"{t.early_symbols:.1%} | {t.first_symbol:.0f} | {seq_len + 10} | "
                f"{share(t.data_in_memory)} | {share(t.attention_on_symbols)} | "
                f"{share(t.recall_of_held)} | {share(t.recall_of_missing)} |")
    longest = max(args.lengths)
    steps = [SCREENED_BY, *(seq_len + 10 for seq_len in sorted(args.lengths))]
    held_lines = ["", "## When the memory lets the symbols go", "",
                  f"On the held-out batch of T = {longest}: the share of the data symbols whose "
                  "state the memory holds at each step (copy runs with attention).", "",
                  "| run | step 20 | " + " | ".join(f"step {step} (recall at T={step - 10})"
                                                  for step in steps[1:]) + " |",
                  "|---|" + "---:|" * len(steps)]
    for run in runs:
        held = held_along(run, steps, longest)
        if held is None:
            continue
        print(f"{run} held along T={longest}: {held}", flush=True)
        held_lines.append(f"| {run.relative_to(HERE) if run.is_relative_to(HERE) else run} | "
                          + " | ".join(f"{value:.1%}" for value in held) + " |")
    args.out.write_text("\n".join(lines + held_lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

"""Every cell on a GPU against cuDNN's LSTM, with and without the engines' Triton kernels.

    python benchmarks/gpu_cells.py --out gpu_cells.md --budget 300     # on a CUDA machine

Issue 55's measurements (and issue 56's GPU bound), in order of what the issues accept on, each
table written to ``--out`` as soon as it is measured, until ``--budget`` seconds have passed:

1. **Supervised copy, hidden 128, T = 100, batch 128**: training iterations/s of the supervised
   trainer's step (sample, forward, loss, backward, clipping, the finiteness check, Adam;
   :func:`cuda_check.supervised_step`). Each cell replayed from a CUDA graph
   (:mod:`rlmem.tasks.cuda_graph`) with its Triton kernels (:mod:`rlmem.cells._engines.gpu`),
   and the same with ``RLMEM_TRITON=0`` (the Python loops: what ran before the kernels);
   ``torch.nn.LSTM`` (cuDNN) eagerly, its usual use. The ratio is to cuDNN in the same run.
2. **The rollout step**: batch 4,096, hidden 128, one step at a time without autograd, the
   state fed back (:func:`cell_speed.rollout_timer`); the ratio is our lstm's time ÷ the
   cell's (≥ 0.5 is issue 55's bar).
3. **T = 1,000, batch 128**: the copy step as in 1, the kernels only.
4. **Transfer-copy evaluation**: relstm, batch 128, one forward of T = 5,000 without autograd.
5. **The rest of the grid**: batch 16 and 1,024 at T = 100 and 1,000.

Timing: each model's step is warmed up (and its graph captured), then the models run in turn,
round after round, each for about ``--seconds`` per round; a model's rate is its iterations
over its seconds. A model that fails (an error, a capture refused) gets its error in its row
and the others go on.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from cell_speed import build, load, rollout_timer
from cuda_check import CudnnSequence, supervised_step
from torch import nn

from rlmem.cells import CELLS, make_cell
from rlmem.cells._engines import gpu
from rlmem.tasks.model import SequenceModel
from rlmem.tasks.registry import make_task

HIDDEN = 128
CUDNN = "torch.nn.LSTM (cuDNN)"


@contextlib.contextmanager
def triton(setting: str) -> Iterator[None]:
    """Run a block with ``RLMEM_TRITON`` set to ``setting`` (``auto``: the kernels on CUDA)."""
    before = os.environ.get(gpu.VARIABLE)
    os.environ[gpu.VARIABLE] = setting
    try:
        yield
    finally:
        if before is None:
            del os.environ[gpu.VARIABLE]
        else:
            os.environ[gpu.VARIABLE] = before


def under(setting: str, step: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        with triton(setting):
            step()

    return run


def copy_steps(cells: list[str], batch: int, seq_len: int,
               before: bool) -> dict[str, Callable[[], None]]:
    """The supervised copy step of each cell (from a CUDA graph, kernels on; with ``before``,
    also kernels off) and of cuDNN's LSTM, keyed by row name."""
    task, cuda = make_task("copy"), torch.device("cuda")
    torch.manual_seed(0)
    steps: dict[str, Callable[[], None]] = {
        CUDNN: supervised_step(CudnnSequence(task.input_size, HIDDEN, task.output_size).to(cuda),
                               task, cuda, batch, seq_len=seq_len)}
    settings = {"kernels": "auto", "Python loops": "0"} if before else {"kernels": "auto"}
    for name in cells:
        for label, setting in settings.items():
            torch.manual_seed(0)
            model: nn.Module = SequenceModel(
                make_cell(name, input_size=task.input_size, hidden_size=HIDDEN),
                task.output_size, task.categorical).to(cuda)
            steps[f"{name}, {label}"] = under(setting, supervised_step(
                model, task, cuda, batch, graph=True, seq_len=seq_len))
    return steps


def rates(steps: dict[str, Callable[[], None]], rounds: int,
          seconds: float) -> dict[str, float | str]:
    """Iterations/s of each step, timed in turn; an error in place of a step that failed."""
    results: dict[str, float | str] = {}
    per_round: dict[str, int] = {}
    for name, step in steps.items():
        try:
            step()  # capture, compile the kernels
            torch.cuda.synchronize()
            start = time.perf_counter()
            step()
            torch.cuda.synchronize()
            per_round[name] = max(1, int(seconds / max(time.perf_counter() - start, 1e-6)))
        except Exception as error:  # a failed model is reported, the others go on
            results[name] = f"error: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    spent = dict.fromkeys(per_round, 0.0)
    for _ in range(rounds):
        for name, count in per_round.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(count):
                steps[name]()
            torch.cuda.synchronize()
            spent[name] += time.perf_counter() - start
    results.update({name: rounds * per_round[name] / spent[name] for name in per_round})
    return results


def copy_table(cells: list[str], batch: int, seq_len: int, before: bool, rounds: int,
               seconds: float) -> list[str]:
    measured = rates(copy_steps(cells, batch, seq_len, before), rounds, seconds)
    reference = measured.get(CUDNN)
    lines = [f"## Supervised copy, hidden {HIDDEN}, T = {seq_len}, batch {batch}: "
             "training iterations/s", "", "| model | it/s | ÷ cuDNN |", "|---|---|---|"]
    for name, value in measured.items():
        if isinstance(value, str):
            lines.append(f"| {name} | {value} | |")
        else:
            ratio = f"{value / reference:.2f}" if isinstance(reference, float) else ""
            lines.append(f"| {name} | {value:.1f} | {ratio} |")
    return lines


def rollout_table(cells: list[str], batch: int, steps: int, repeats: int) -> list[str]:
    """Seconds per acting step; our lstm's ÷ each cell's."""
    cuda = torch.device("cuda")
    seconds: dict[str, float | str] = {}
    for name in ["lstm", *(c for c in cells if c != "lstm")]:
        try:
            cell, x, resets = build(name, batch, HIDDEN, steps, cuda)
            timer = rollout_timer(cell, x, resets)
            timer()
            seconds[name] = min(timer() for _ in range(repeats))
        except Exception as error:  # reported in its row
            seconds[name] = f"error: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    lstm = seconds["lstm"]
    lines = [f"## The rollout step: batch {batch}, hidden {HIDDEN}, no autograd "
             f"(best of {repeats} runs of {steps} steps)", "",
             "| cell | µs per step | our lstm's time ÷ the cell's |", "|---|---|---|"]
    for name, value in seconds.items():
        if isinstance(value, str):
            lines.append(f"| {name} | {value} | |")
        else:
            ratio = f"{lstm / value:.2f}" if isinstance(lstm, float) else ""
            lines.append(f"| {name} | {value * 1e6:.0f} | {ratio} |")
    return lines


def transfer_copy_line(batch: int, seq_len: int) -> list[str]:
    """One forward of relstm over a copy sequence of ``seq_len`` without autograd."""
    task, cuda = make_task("copy"), torch.device("cuda")
    torch.manual_seed(0)
    model = SequenceModel(make_cell("relstm", input_size=task.input_size, hidden_size=HIDDEN),
                          task.output_size, task.categorical).to(cuda)
    generator = torch.Generator(device=cuda).manual_seed(0)
    with torch.no_grad():
        model(task.sample(batch, 100, generator).inputs)  # the kernels compile
        inputs = task.sample(batch, seq_len, generator).inputs
        torch.cuda.synchronize()
        start = time.perf_counter()
        model(inputs)
        torch.cuda.synchronize()
    return [f"## Transfer-copy evaluation: relstm, batch {batch}, T = {seq_len}, one forward "
            f"without autograd: {time.perf_counter() - start:.2f} s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", nargs="+", choices=sorted(CELLS),
                        default=[c for c in sorted(CELLS) if c not in ("lstm", "gru")])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=0.3, help="per model and round")
    parser.add_argument("--budget", type=float, default=300.0,
                        help="start no new table after this many seconds")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("no CUDA device")
    torch.set_num_threads(1)
    started = time.perf_counter()
    print(f"# {torch.cuda.get_device_name()}", flush=True)
    lines = [f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, "
             f"Triton installed: {gpu.triton_installed()}; host load average (1, 5, 15 min) "
             f"{load()}"]
    tables: list[Callable[[], list[str]]] = [
        lambda: copy_table(["lstm", *args.cells], 128, 100, True, args.rounds, args.seconds),
        lambda: rollout_table(args.cells, 4096, 32, args.rounds),
        lambda: copy_table(["lstm", *args.cells], 128, 1000, False, args.rounds, args.seconds),
        lambda: transfer_copy_line(128, 5000),
        *(lambda b=batch, t=seq_len: copy_table(args.cells, b, t, False, args.rounds,
                                                args.seconds)
          for seq_len in (100, 1000) for batch in (16, 1024)),
    ]
    for table in tables:
        if time.perf_counter() - started > args.budget:
            lines += ["", f"(stopped: the budget of {args.budget:.0f} s was spent)"]
            break
        try:
            new = ["", *table()]
        except Exception as error:  # one table's failure leaves the others
            new = ["", f"(a table failed: {type(error).__name__}: {error})"]
        new.append(f"<!-- {time.perf_counter() - started:.0f} s in; load average {load()} -->")
        lines += new
        print("\n".join(new), flush=True)
        if args.out is not None:
            args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

"""Does a saved supervised run compute with subnormal floats, and what do they cost on the CPU?

    OMP_NUM_THREADS=1 python benchmarks/denormal_floats.py RUN_DIR [RUN_DIR ...] [--rounds 2]

A float32 below 1.2e-38 is subnormal, and most x86 processors take tens of times longer over
arithmetic with one. A cell whose state decays towards zero over a long sequence can fill its
activations and gradients with them late in training, and slow down while nothing else
changes. For each run, on one batch of its task at its training length (drawn from seed 0,
not from the run's own generator), this times a forward and backward pass of the task's loss
with subnormals kept (``flush_denormal=false``, IEEE arithmetic), then flushed to zero
(``flush_denormal=true``: :func:`rlmem.runs.arithmetic.subnormal_floats`, as a run computes
with either), then kept again, and prints the medians of ``--rounds`` passes each with the load
average beside them: a ratio from one sitting, not an absolute speed. A processor without a
flush-to-zero mode is refused with the run's own message.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from rlmem.runs.arithmetic import subnormal_floats
from rlmem.tasks.saved import load_saved_model


def seconds_per_pass(run_dir: Path, flush: bool, rounds: int) -> float:
    """The median seconds of a forward and backward pass of the run's model, with subnormals
    flushed to zero or not."""
    saved = load_saved_model(run_dir)
    batch = saved.task.sample(int(saved.config["batch_size"]), int(saved.config["seq_len"]),
                              torch.Generator().manual_seed(0))
    model = saved.model.train()
    with subnormal_floats(flush):  # as a run with flush_denormal=<flush> computes
        times = []
        for _ in range(rounds + 1):  # the first pass warms up and is not counted
            start = time.perf_counter()
            outputs, _ = model(batch.inputs)
            saved.task.loss(outputs, batch).backward()
            times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+", help="supervised run directories")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes per setting")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| run | iteration | s per pass, kept | flushed | kept again | flushed ÷ kept |\n"
          "|---|---:|---:|---:|---:|---:|")
    for run_dir in args.runs:
        iteration = load_saved_model(run_dir).iteration
        kept = seconds_per_pass(run_dir, False, args.rounds)
        flushed = seconds_per_pass(run_dir, True, args.rounds)
        again = seconds_per_pass(run_dir, False, args.rounds)
        print(f"| {run_dir} | {iteration} | {kept:.2f} | {flushed:.2f} | {again:.2f} | "
              f"{flushed / statistics.mean([kept, again]):.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""GTrXL's chunk on the CPU: one training step's time (forward and backward over a chunk) with
the attention's queries in blocks of each size, taking turns.

    OMP_NUM_THREADS=1 python benchmarks/gtrxl_blocks.py [--steps 120] [--batch 128] [--rounds 3]

The supervised copy task's shape by default (T = 120: a delay of 100 and 2 × 10 symbols,
batch 128, hidden 128, two layers, four heads). For each window M, the blocks of
:func:`~rlmem.cells._engines.windowed_attention.query_block` (M, at least 16) against 128 (the
block every window took before) and 2M; the best of ``--rounds`` turns of each, after a
warm-up, one torch thread. Prints a markdown table with the machine's load before and after.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from unittest import mock

import torch

from rlmem.cells import gtrxl, make_cell
from rlmem.cells._engines.windowed_attention import query_block


def training_step(window: int, steps: int, batch: int, hidden: int) -> Callable[[], None]:
    """Forward and backward of one chunk of ``steps`` steps through a fresh GTrXL."""
    torch.manual_seed(0)
    cell = make_cell("gtrxl", input_size=10, hidden_size=hidden, window=window)
    x = torch.randn(steps, batch, 10)
    resets = torch.zeros(steps, batch, dtype=torch.bool)

    def run() -> None:
        y, _ = cell(x, cell.initial_state(batch), resets)
        y.pow(2).mean().backward()
    return run


def seconds_by_block(window: int, blocks: list[int], args: argparse.Namespace) -> dict[int, float]:
    """The best time of each block size, the sizes taking turns."""
    run = training_step(window, args.steps, args.batch, args.hidden)
    best = dict.fromkeys(blocks, float("inf"))
    for round_ in range(args.rounds + 1):
        for block in blocks:
            with mock.patch.object(gtrxl, "query_block", lambda window, device, b=block: b):
                start = time.perf_counter()
                run()
                if round_:  # the first round warms up
                    best[block] = min(best[block], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--windows", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    load_before = os.getloadavg()[0]
    rows = []
    for window in args.windows:
        chosen = query_block(window, torch.device("cpu"))
        blocks = sorted({chosen, 128, 2 * window})
        best = seconds_by_block(window, blocks, args)
        cells = ", ".join(f"{block}: {best[block]:.2f} s" for block in blocks)
        rows.append(f"| {window} | {chosen} | {cells} | {best[128] / best[chosen]:.2f}× |")
    print(f"T = {args.steps}, batch {args.batch}, hidden {args.hidden}; load "
          f"{load_before:.2f} → {os.getloadavg()[0]:.2f}\n")
    print("| window M | block chosen | best seconds by block | 128 / chosen |")
    print("|---:|---:|---|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()

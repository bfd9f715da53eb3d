"""Forward+backward time per step of every registered cell, relative to ``lstm``.

    python benchmarks/cell_speed.py                      # batch 16, hidden 128, T=128, CPU
    python benchmarks/cell_speed.py --threads 2 --repeats 10

Each cell runs a full sequence with one reset in the middle of one environment (so every cell
takes its reset-aware path), then backpropagates a sum of its outputs and aux losses. The median
over ``--repeats`` runs, after a warm-up, is divided by T.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlmem.cells import CELLS, make_cell


def time_cell(name: str, batch: int, hidden: int, steps: int, repeats: int,
              device: torch.device) -> float:
    """Median seconds per time step of forward + backward."""
    torch.manual_seed(0)
    cell = make_cell(name, input_size=hidden, hidden_size=hidden).to(device)
    x = torch.randn(steps, batch, hidden, device=device)
    resets = torch.zeros(steps, batch, dtype=torch.bool, device=device)
    resets[steps // 2, 0] = True
    timings = []
    for repeat in range(repeats + 1):
        start = time.perf_counter()
        out = cell.forward_aux(x, None, resets)
        (out.output.sum() + out.aux.total_loss()).backward()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if repeat:  # the first run warms up
            timings.append(time.perf_counter() - start)
        cell.zero_grad(set_to_none=True)
    return statistics.median(timings) / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    results = {name: time_cell(name, args.batch, args.hidden, args.steps, args.repeats, device)
               for name in sorted(CELLS)}
    print(f"batch {args.batch}, hidden {args.hidden}, T={args.steps}, {device}, "
          f"{args.threads} thread(s), median of {args.repeats}")
    print("| cell | ms / step (fwd+bwd) | relative to lstm |")
    print("|---|---:|---:|")
    for name, seconds in sorted(results.items(), key=lambda item: item[1]):
        print(f"| {name} | {1e3 * seconds:.3f} | {seconds / results['lstm']:.2f}× |")


if __name__ == "__main__":
    main()

"""torch's ``functional.linear`` (its BLAS: MKL in the x86 wheels) against oneDNN's product
(``rlmem.cells._engines.onednn_linear``), forward alone and forward + backward, per shape.

    OMP_NUM_THREADS=1 python benchmarks/onednn_linear.py [--repeats 30]

The shapes are a supervised batch's projections (128 sequences × 64 steps, hidden 128, into
128, 256 and 512 features), a whole PPO minibatch's (256 frames) and a rollout step's (16 envs).
Times alternate between the two, one shape at a time; prints ms and GFLOP/s, with the CPU and
the load average.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import torch
from machine import cpu_model

from rlmem.cells._engines.onednn_linear import MIN_PRODUCT, linear, onednn_products

SHAPES = [(8192, 128, 128), (8192, 128, 256), (8192, 256, 128), (8192, 128, 512),
          (256, 64, 256), (16, 64, 256)]
"""(rows, inputs, outputs)."""


def seconds(work: Callable[[], object], repeats: int) -> float:
    """The median time of ``work()`` over ``repeats`` calls, after three warm-ups."""
    for _ in range(3):
        work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def time_shape(rows: int, inputs: int, outputs: int, repeats: int) -> dict[str, float]:
    """Median seconds of the forward and of forward + backward, torch's and oneDNN's."""
    x = torch.randn(rows, inputs, requires_grad=True)
    weight = torch.randn(outputs, inputs, requires_grad=True)
    bias = torch.randn(outputs, requires_grad=True)
    grad = torch.randn(rows, outputs)
    timed: dict[str, float] = {}
    for name, enabled in (("torch", False), ("onednn", True)):
        with onednn_products(enabled), torch.no_grad():
            timed[f"{name} fwd"] = seconds(lambda: linear(x, weight, bias), repeats)
        with onednn_products(enabled):
            timed[f"{name} both"] = seconds(lambda: linear(x, weight, bias).backward(grad),
                                            repeats)
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{cpu_model()}; torch {torch.__version__}, one thread; load average "
          f"{os.getloadavg()[0]:.2f}\n")
    print("| rows × in → out | torch fwd ms | oneDNN fwd ms | torch fwd+bwd ms | "
          "oneDNN fwd+bwd ms | fwd+bwd ratio | oneDNN GFLOP/s (fwd) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for rows, inputs, outputs in SHAPES:
        timed = time_shape(rows, inputs, outputs, args.repeats)
        flop = 2 * rows * inputs * outputs
        print(f"| {rows} × {inputs} → {outputs} | {timed['torch fwd'] * 1e3:.3f} | "
              f"{timed['onednn fwd'] * 1e3:.3f} | {timed['torch both'] * 1e3:.3f} | "
              f"{timed['onednn both'] * 1e3:.3f} | "
              f"{timed['torch both'] / timed['onednn both']:.2f}× | "
              f"{flop / timed['onednn fwd'] / 1e9:.0f} |")
    print(f"\nload average at end {os.getloadavg()[0]:.2f}; below {MIN_PRODUCT:,} "
          "multiply-adds both columns run torch's product")


if __name__ == "__main__":
    main()

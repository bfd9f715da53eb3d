"""DeltaNet's compiled chunk (``csrc/delta_rule.h``): its forward and backward kernels alone.

    OMP_NUM_THREADS=1 python benchmarks/delta_rule_kernel.py
    OMP_NUM_THREADS=1 python benchmarks/delta_rule_kernel.py --shapes 128x64x4x32 16x16x4x16

Each shape ``TxBxHxD`` (steps, items, heads, head size) is one random chunk with one reset,
from DeltaNet.project_input's features (the short convolution's four taps): ``delta_forward``
and ``delta_backward`` called directly, each row the median over ``--repeats`` rounds of the mean
of ``--calls`` calls, the two kernels taking turns. The cell's whole training step against
lstm's is ``benchmarks/cell_speed.py``'s; this splits its chunk from its products. To compare
two versions, run this file under each (``PYTHONPATH`` at the other checkout) in turns. The
first line says whether the float32 steps ran in AVX-512 (``csrc/delta_rule_wide.h``: heads of
16, 32 or 64 on a CPU that has it); the load average is printed before and after.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

import torch
from alternating import medians
from machine import cpu_model

from rlmem.cells._engines import compiled
from rlmem.runs.allocator import keep_freed_memory

SHAPES = ("128x64x4x32", "128x16x4x32", "16x16x4x32")
"""Issue 56's training step (T = 128, batch 64, DeltaNet's default 4 heads of 32 at hidden
128), batch 16, and a PPO minibatch's chunk of 16 steps of 16 items."""

TAPS = 4
"""The short convolution's width (DeltaNet's default)."""


def kernel_calls(native: Any, shape: str) -> dict[str, Callable[[], None]]:
    """The forward and the backward kernel over one random chunk of ``shape``."""
    steps, batch, heads, size = (int(part) for part in shape.split("x"))
    width = 3 * heads * size
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(steps, batch, width + heads, generator=generator)
    window = torch.randn(batch, TAPS, width, generator=generator)
    taps = 0.5 * torch.randn(TAPS, width, generator=generator)
    state = 0.1 * torch.randn(batch, heads, size, size, generator=generator)
    resets = torch.zeros(steps, batch, dtype=torch.bool)
    resets[steps // 2, 0] = True
    grad_o = torch.randn(steps, batch, heads, size, generator=generator)
    grad_state, grad_window = torch.randn_like(state), torch.randn_like(window)

    def forward() -> None:
        native.delta_forward(features, window, taps, state, resets, heads)

    def backward() -> None:
        native.delta_backward(grad_o, grad_state, grad_window, features, window, taps, state,
                              resets, heads)

    return {"forward": forward, "backward": backward}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES))
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args()
    keep_freed_memory()
    native = compiled.ops(torch.zeros(1))
    if native is None:
        raise SystemExit("the compiled loops cannot be built here")
    wide = bool(native.blocked_product_available())
    print(f"{cpu_model()}; torch {torch.__version__}; float32 steps in AVX-512: {wide}; "
          f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| shape T×B×H×D | forward ms | backward ms |")
    print("|---|---:|---:|")
    for shape in args.shapes:
        times = medians(kernel_calls(native, shape), args.repeats, args.calls)
        print(f"| {shape} | {1e3 * times['forward']:.2f} | {1e3 * times['backward']:.2f} |")
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

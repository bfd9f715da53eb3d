"""An LSTM chunk that no reset cuts: torch's fused kernel (oneDNN on the CPU) against the compiled
chunk (:mod:`rlmem.cells._engines.lstm_chunk`), per shape, one process taking turns.

    OMP_NUM_THREADS=1 python benchmarks/lstm_chunk_kernel.py
    OMP_NUM_THREADS=1 python benchmarks/lstm_chunk_kernel.py --shapes 16x16x64x64 64x4x64x256

Each shape ``TxBxIxH`` (steps, items, input size, hidden size) is timed twice: forward and
backward of the outputs' and final state's sum (a PPO minibatch's chunk), and forward alone
under ``torch.no_grad()`` (an acting step). Each row is the median over ``--repeats`` rounds of
the mean of ``--calls`` calls, the two kernels alternating round by round; the ratio is the
compiled chunk's time over torch's (below 1: the chunk is faster). The first line says whether
the chunk's products ran in the blocked AVX-512 loop (``csrc/blocked_product.h``) and the CPU;
the load average is printed before and after. What :data:`rlmem.cells._engines.lstm_chunk.
SMALL_CHUNK` decides is each shape's last column.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable

import torch
from alternating import compiled_loops_opening, medians

from rlmem.cells._engines.lstm_chunk import lstm_chunk, takes_whole_chunk

SHAPES = ("16x16x64x64", "4x64x64x64", "16x16x64x128", "16x64x64x64", "64x16x64x64",
          "64x4x64x256", "1x256x64x64")
"""The fast and minigrid presets' minibatch chunk (16 steps of 16 items, hidden 64), a shorter
and wider one, larger ones, the generic preset's (64 steps of 4, hidden 256), and an acting step
of the fast preset's 256 envs."""


def chunk_calls(shape: str) -> tuple[Callable[[bool], None], Callable[[bool], None], bool]:
    """Calls of torch's kernel and of the compiled chunk over one random chunk of ``shape``
    (each given whether to backpropagate), and whether the chunk takes the compiled path."""
    steps, items, inputs, hidden = (int(size) for size in shape.split("x"))
    torch.manual_seed(0)
    w_ih, w_hh, b_ih, b_hh = (weight.detach().requires_grad_()
                              for weight in torch.nn.LSTM(inputs, hidden).all_weights[0])
    weights = (w_ih, w_hh, b_ih, b_hh)
    x = torch.randn(steps, items, inputs, requires_grad=True)
    h0, c0 = torch.zeros(items, hidden), torch.zeros(items, hidden)
    resets = torch.zeros(steps, items, dtype=torch.bool)

    def fused(train: bool) -> None:
        with torch.set_grad_enabled(train):
            y, h, _ = torch.lstm(x, (h0[None], c0[None]), list(weights), True, 1, 0.0, train,
                                 False, False)
            if train:
                (y.sum() + h.sum()).backward()

    def chunk(train: bool) -> None:
        with torch.set_grad_enabled(train):
            whole = lstm_chunk(x, weights, h0, c0, resets)
            assert whole is not None  # the compiled loops run (main checks)
            if train:
                (whole[0].sum() + whole[1].sum()).backward()

    with torch.enable_grad():
        taken = takes_whole_chunk(x, hidden)
    return fused, chunk, taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), help="TxBxIxH")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    compiled_loops_opening()
    print("\n| T × B × I × H | train: torch ms | chunk ms | ratio | no grad: torch ms | "
          "chunk ms | ratio | reset-free chunk taken |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for shape in args.shapes:
        fused, chunk, taken = chunk_calls(shape)
        row = []
        for train in (True, False):
            seconds = medians({"torch": functools.partial(fused, train),
                                      "chunk": functools.partial(chunk, train)},
                                     args.repeats, args.calls)
            row.append(f"{1e3 * seconds['torch']:.3f} | {1e3 * seconds['chunk']:.3f} | "
                       f"{seconds['chunk'] / seconds['torch']:.2f}")
        print(f"| {shape} | {' | '.join(row)} | {'yes' if taken else 'no'} |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

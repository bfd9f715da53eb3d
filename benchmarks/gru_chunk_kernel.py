"""A GRU over a chunk: torch's kernel once per reset-free segment (``fused_rnn.gru``'s way
before the compiled chunk) against the compiled chunk (:mod:`rlmem.cells._engines.gru_chunk`),
per shape, one process taking turns.

    OMP_NUM_THREADS=1 python benchmarks/gru_chunk_kernel.py
    OMP_NUM_THREADS=1 python benchmarks/gru_chunk_kernel.py --shapes 16x16x64x64 128x64x128x128

Each shape ``TxBxIxH`` (steps, items, input size, hidden size) is timed three ways: forward and
backward of the outputs' and final state's sum with no reset in the chunk (torch's kernel: one
call), the same where each item's episode ends with probability ``--reset`` a step (the chunk
cut at every step where any item resets: a PPO minibatch's chunk), and that chunk's forward
alone under ``torch.no_grad()``. Each number is the median over ``--repeats`` rounds of the
mean of ``--calls`` calls, the two taking turns; the ratio is the compiled chunk's time over
torch's (below 1: the chunk is faster). The first line says whether the chunk's products ran in
the blocked AVX-512 loop (``csrc/blocked_product.h``) and the CPU; the load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import functools
import os
from collections.abc import Callable

import torch
from alternating import compiled_loops_opening, medians

from rlmem.cells._engines.fused_rnn import in_item_slices, scan_segments
from rlmem.cells._engines.gru_chunk import GRULayout, gru_chunk
from rlmem.cells.gru import GRUState

SHAPES = ("16x16x64x64", "16x64x64x64", "128x16x128x128", "128x64x128x128", "1x256x64x64")
"""The fast and minigrid presets' minibatch chunk (16 steps of 16 items, hidden 64), a wider
one, ``benchmarks/cell_speed.py``'s two training shapes, and an acting step of the fast preset's
256 envs."""


def chunk_calls(shape: str, reset: float) -> tuple[Callable[[bool, bool], None],
                                                   Callable[[bool, bool], None]]:
    """Calls of torch's kernel per segment and of the compiled chunk over one random chunk of
    ``shape``, each given whether to backpropagate and whether the chunk has resets."""
    steps, items, inputs, hidden = (int(size) for size in shape.split("x"))
    generator = torch.Generator().manual_seed(0)
    weights = [weight.detach().requires_grad_()
               for weight in torch.nn.GRU(inputs, hidden).all_weights[0]]
    x = torch.randn(steps, items, inputs, generator=generator, requires_grad=True)
    h0 = torch.zeros(items, hidden)
    cut = torch.rand(steps, items, generator=generator) < reset
    uncut = torch.zeros(steps, items, dtype=torch.bool)

    def fused(train: bool, with_resets: bool) -> None:
        def run(segment: torch.Tensor, state: GRUState) -> tuple[torch.Tensor, GRUState]:
            y, h = in_item_slices(
                lambda part, hx: tuple(torch.gru(part, hx[0], weights, True, 1, 0.0, train,
                                                 False, False)),
                segment, (state.h.unsqueeze(0).contiguous(),), gates=3 * hidden)
            return y, GRUState(h.squeeze(0))

        with torch.set_grad_enabled(train):
            y, state, _ = scan_segments(run, x, GRUState(h0), cut if with_resets else uncut)
            if train:
                (y.sum() + state.h.sum()).backward()

    def chunk(train: bool, with_resets: bool) -> None:
        with torch.set_grad_enabled(train):
            whole = gru_chunk(x, GRULayout.of(*weights), h0, cut if with_resets else uncut)
            assert whole is not None  # the compiled loops run (main checks)
            if train:
                (whole[0].sum() + whole[1].sum()).backward()

    return fused, chunk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), help="TxBxIxH")
    parser.add_argument("--reset", type=float, default=0.05,
                        help="each item's probability of an episode end a step")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=10)
    args = parser.parse_args()
    compiled_loops_opening()
    print("\n| T × B × I × H | train, no reset: torch ms | chunk ms | ratio | train, resets: "
          "torch ms | chunk ms | ratio | no grad, resets: torch ms | chunk ms | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shape in args.shapes:
        fused, chunk = chunk_calls(shape, args.reset)
        row = []
        for train, with_resets in ((True, False), (True, True), (False, True)):
            seconds = medians({"torch": functools.partial(fused, train, with_resets),
                               "chunk": functools.partial(chunk, train, with_resets)},
                              args.repeats, args.calls)
            row.append(f"{1e3 * seconds['torch']:.3f} | {1e3 * seconds['chunk']:.3f} | "
                       f"{seconds['chunk'] / seconds['torch']:.2f}")
        print(f"| {shape} | {' | '.join(row)} |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""``agent.blocked_products``: the PPO model's own products in the blocked AVX-512 loop against
torch's, per product shape and in whole fast-preset updates, one process taking turns; with
``--key memory_products``, the memory cell's products (``agent.memory_products``) in whole
updates alone.

    OMP_NUM_THREADS=1 python benchmarks/blocked_products.py
    OMP_NUM_THREADS=1 python benchmarks/blocked_products.py --updates 20 --memory relstm
    OMP_NUM_THREADS=1 python benchmarks/blocked_products.py --key memory_products --memory relstm

First each product of a fast-preset minibatch (256 frames) and of its acting step (256 envs),
``functional.linear`` against :func:`rlmem.agents.blocked_linear.linear` inside
``blocked_products()``, forward alone and forward and backward, the median over rounds of the
mean of ``--calls`` calls, alternating round by round. Then one fast-preset trainer on
DoorKey-5x5 with every key decided as a run decides it (``throughput.py``'s trainer) but the
key (``--key``) off, and one with it on, from the same seed, taking turns update by update,
rollout and update timed apart; each column the median over ``--updates`` updates of each. The first
line names the CPU and whether the blocked loop runs on it; the load average is printed
before and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from alternating import medians
from machine import cpu_model
from throughput import decided_config, ours

from rlmem.agents.blocked_linear import blocked_products, linear
from rlmem.agents.ppo.presets import PRESETS, Preset
from rlmem.cells._engines import compiled
from rlmem.runs.allocator import keep_freed_memory

SHAPES = ((256, 64, 64), (256, 64, 7), (256, 64, 1), (256, 128, 64), (1024, 64, 32))
"""rows × inputs → outputs: the heads' first layers, the actor's and critic's outputs, the grid
encoder's last convolution (2 × 2 × 32 → 64) and its window convolution (a minibatch's 1,024
windows of 2 × 2 × 16 → 32, there inside the compiled loop)."""


def product_call(shape: tuple[int, int, int], blocked: bool, backward: bool
                 ) -> Callable[[], None]:
    """One product of ``shape`` (and its backward) through ``linear`` inside or outside the
    context (outside: ``functional.linear`` itself)."""
    rows, inputs, outputs = shape
    torch.manual_seed(0)
    x = torch.randn(rows, inputs, requires_grad=backward)
    weight = torch.randn(outputs, inputs, requires_grad=backward)
    bias = torch.randn(outputs, requires_grad=backward)
    grad = torch.randn(rows, outputs)

    def call() -> None:
        with blocked_products(blocked), torch.set_grad_enabled(backward):
            y = linear(x, weight, bias)
            if backward:
                y.backward(grad)

    return call


def product_table(rounds: int, per_round: int) -> None:
    print("\n| rows × in → out | forward: torch µs | blocked µs | ratio | forward + backward: "
          "torch µs | blocked µs | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for shape in SHAPES:
        cells = []
        for backward in (False, True):
            seconds = medians({"torch": product_call(shape, False, backward),
                               "blocked": product_call(shape, True, backward)},
                              rounds, per_round)
            cells.append(f"{1e6 * seconds['torch']:.1f} | {1e6 * seconds['blocked']:.1f} | "
                         f"{seconds['blocked'] / seconds['torch']:.2f}")
        print(f"| {shape[0]} × {shape[1]} → {shape[2]} | {' | '.join(cells)} |")


def update_table(memory: str, updates: int, key: str) -> None:
    config = decided_config("DoorKey-5x5", Preset.fast, memory)
    changes: dict[str, Any] = {}
    trainers = {}
    for on in (False, True):  # the same seed: the same start
        changes[key] = on
        trainers[on] = ours("DoorKey-5x5", PRESETS[Preset.fast].num_envs, memory,
                            dataclasses.replace(config, **changes), "tensor")
    parts: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    try:
        for trainer in trainers.values():
            trainer.step()  # warm-up
        for _ in range(updates):
            for blocked, trainer in trainers.items():
                start = time.perf_counter()
                rollout = trainer.collect()
                collected = time.perf_counter()
                trainer.update(rollout)
                parts[blocked].append((collected - start, time.perf_counter() - collected))
    finally:
        for trainer in trainers.values():
            trainer.close()
    frames = trainers[True].frames
    print(f"\n{memory}, DoorKey-5x5, fast preset, {updates} updates each, alternating:\n")
    print(f"| {key} | rollout ms | update ms | frames/s |")
    print("|---|---:|---:|---:|")
    for blocked, name in ((False, "off"), (True, "on")):
        rollout = statistics.median(part[0] for part in parts[blocked])
        update = statistics.median(part[1] for part in parts[blocked])
        print(f"| {name} | {1e3 * rollout:.1f} | {1e3 * update:.1f} | "
              f"{frames / (rollout + update):,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", default="lstm")
    parser.add_argument("--updates", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--key", choices=("blocked_products", "memory_products"),
                        default="blocked_products")
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_freed_memory()
    runs = compiled.blocked_ops(torch.zeros(1)) is not None
    print(f"CPU: {cpu_model()}; the blocked loop runs here: {'yes' if runs else 'no'}; "
          f"load average {os.getloadavg()[0]:.2f}")
    if not runs:
        raise SystemExit("without the blocked loop both sides are torch's: nothing to compare")
    if args.key == "blocked_products":
        product_table(args.rounds, args.calls)
    update_table(args.memory, args.updates, args.key)
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

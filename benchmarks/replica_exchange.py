"""How long one exchange of a data-parallel run's gradients takes between two processes:
torch.distributed's gloo all-reduce over the loopback against rlmem's shared-memory rows and
barrier (:mod:`rlmem.agents.ppo.replicas`), at the size of the fast preset's lstm model
(54,168 weights) and at 1,000 floats.

    OMP_NUM_THREADS=1 python benchmarks/replica_exchange.py [--rounds 200]

Each exchange sums both processes' vectors and leaves the sum in both; the mean of ``--rounds``
timed exchanges after 10 of warm-up, in milliseconds, as the first process sees it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rlmem.agents.ppo.replicas import Exchange, Replicas


def _gloo(rank: int, store_path: str, size: int, rounds: int, out: Path) -> None:
    torch.set_num_threads(1)
    group = dist.ProcessGroupGloo(dist.FileStore(store_path, 2), rank, 2, timedelta(seconds=60))
    values = torch.full((size,), float(rank + 1))
    for _ in range(10):
        group.allreduce([values.clone()]).wait()  # type: ignore[attr-defined]
    start = time.perf_counter()
    for _ in range(rounds):
        group.allreduce([values.clone()]).wait()  # type: ignore[attr-defined]
    if rank == 0:
        out.write_text(f"{(time.perf_counter() - start) / rounds * 1e3:.3f}")


def _shared(rank: int, exchange: Exchange, size: int, rounds: int, out: Path) -> None:
    torch.set_num_threads(1)
    replicas = Replicas(exchange, rank)
    values = torch.full((size,), float(rank + 1))
    for _ in range(10):
        replicas.total(values)
    start = time.perf_counter()
    for _ in range(rounds):
        replicas.total(values)
    if rank == 0:
        out.write_text(f"{(time.perf_counter() - start) / rounds * 1e3:.3f}")


def timed(way: str, size: int, rounds: int) -> float:
    """Milliseconds per exchange of ``size`` floats, ``way`` ``gloo`` or ``shared``."""
    context = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "ms"
        if way == "gloo":
            arguments: tuple[object, ...] = (str(Path(folder) / "store"), size, rounds, out)
            target = _gloo
        else:
            exchange = Exchange.of(2, size, context.Barrier(2), context.Queue())
            arguments = (exchange, size, rounds, out)
            target = _shared  # type: ignore[assignment]
        other = context.Process(target=target, args=(1, *arguments))
        other.start()
        leader = threading.Thread(target=target, args=(0, *arguments))
        leader.start()
        leader.join()
        other.join()
        return float(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("| floats | gloo all-reduce (ms) | shared rows and barrier (ms) |")
    print("|---:|---:|---:|")
    for size in (54_168, 1_000):
        print(f"| {size} | {timed('gloo', size, args.rounds):.2f} | "
              f"{timed('shared', size, args.rounds):.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

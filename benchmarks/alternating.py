"""Timing several calls in turns, so that a shared machine's load hits all of them alike; and
the opening of the benchmarks that set the compiled loops against torch's kernels."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from machine import cpu_model

from rlmem.cells._engines import compiled
from rlmem.runs.allocator import keep_freed_memory


def medians(calls: dict[str, Callable[[], None]], rounds: int,
            per_round: int) -> dict[str, float]:
    """Each call's median over ``rounds`` of its mean time in seconds over ``per_round``
    calls, the calls taking turns round by round after one warm-up round."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for index in range(rounds + 1):
        for name, call in calls.items():
            start = time.perf_counter()
            for _ in range(per_round):
                call()
            if index > 0:
                times[name].append((time.perf_counter() - start) / per_round)
    return {name: statistics.median(values) for name, values in times.items()}


def compiled_loops_opening() -> Any:
    """One thread, freed memory kept, and the compiled loops (exiting where they are not
    available: there is nothing to compare), with a line naming the CPU, whether their products
    run in the blocked AVX-512 loop, and the load."""
    torch.set_num_threads(1)
    keep_freed_memory()
    ops = compiled.ops(torch.zeros(1))
    if ops is None:
        raise SystemExit("the compiled loops are not available here (see rlmem.cells._engines."
                         "compiled): nothing to compare")
    print(f"CPU: {cpu_model()}; the blocked AVX-512 products: "
          f"{'yes' if ops.blocked_product_available() else 'no (ATen products)'}; "
          f"load average {os.getloadavg()[0]:.2f}")
    return ops

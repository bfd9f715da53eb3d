"""Timing several calls in turns, so that a shared machine's load hits all of them alike."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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

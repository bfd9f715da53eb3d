"""Freed memory kept by the process rather than returned to the system (glibc's ``mallopt``).

torch's CPU kernels that allocate their buffers afresh at every call (its LSTM and GRU above
all, whose workspaces at a supervised batch are several MB) got them either from the C
library's heap, already in memory, or from fresh pages that the kernel maps and faults in on
first touch, by glibc's rules: a block above its ``mmap`` threshold is mapped anew each time,
and the top of the heap is returned to the system above its trim threshold, thresholds that
move with what the process has freed before. On this project's machine that made torch's LSTM
training step (batch 64, T = 128) take 0.27 ms or 0.41 ms in the same quiet minutes, and a
supervised copy run of ``lstm`` (T = 100, batch 128) 11.5-11.7 iterations/s against 18.3-18.8
with the thresholds raised (``benchmarks/results/cell_speed.md``, session 78). Our compiled
cells recycle their buffers (:mod:`rlmem.cells._engines.workspace`) and moved by 2-9%.

:func:`keep_freed_memory` raises both thresholds to 1 GiB, so blocks below that come from the
heap and freed memory stays with the process: a run's resident memory stays near its peak
instead of shrinking between steps. The run programs call it when a run opens
(:func:`rlmem.runs.session.open_run`) and before they evaluate a saved run (``rlmem.evaluate``,
the supervised transfer-copy evaluation); ``import rlmem`` does not. It changes no arithmetic.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import platform
from collections.abc import Callable

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc's ``mallopt`` parameters (``malloc.h``)."""

THRESHOLD = 1 << 30
"""1 GiB: blocks below it come from the heap, and the heap keeps that much free at its top."""


def keep_freed_memory() -> bool:
    """Raise glibc's ``mmap`` and trim thresholds to :data:`THRESHOLD` for this process (the
    module docstring). Returns whether it took: False off Linux or without glibc's
    ``mallopt`` (musl, say), where the allocator stays as it was."""
    mallopt = _mallopt()
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, THRESHOLD))


@functools.cache
def _mallopt() -> Callable[[int, int], int] | None:
    """The C library's ``mallopt``, looked up once per process (``find_library`` runs
    ``ldconfig``, about 5 ms, and every run opened calls :func:`keep_freed_memory`); None off
    Linux or where there is none."""
    if platform.system() != "Linux":
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        mallopt: Callable[[int, int], int] = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    return mallopt

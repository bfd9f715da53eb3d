"""What CPU a timing ran on, for the line beside its numbers.

A cloud machine's model name can be as vague as "AMD EPYC" while its generations differ several
times over in vector width (session 77's machine, family 26, has AVX-512 datapaths; oneDNN's
LSTM ran 3.4x as fast there as on the machine of session 65), so the family, model and widest
vector extension are printed beside the name: ratios between kernels move with them.
"""

from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name, family, model and widest vector extension (Linux), else the
    platform's processor string; e.g. ``AMD EPYC (family 26, model 2, avx512)``."""
    try:
        fields: dict[str, str] = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or "unknown"
    flags = set(fields.get("flags", "").split())
    vector = next((name for name in ("avx512f", "avx2", "avx") if name in flags), "no avx")
    return (f"{fields.get('model name', 'unknown')} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')}, {vector.removesuffix('f')})")


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc's ``mallopt`` parameters (``malloc.h``)."""


def keep_freed_memory() -> bool:
    """Have glibc's allocator keep what a process frees and never map a large block afresh
    (``mallopt``: no trimming, no ``mmap`` below 1 GiB), so that no kernel's time includes the
    page faults of touching new memory. Whether a block of several MB came from the heap or
    from a fresh ``mmap`` otherwise depended on what the process had run before: torch's LSTM
    training step (batch 64, T = 128) took 0.27-0.28 ms or 0.38-0.41 ms in the same quiet
    minutes on session 78's machine, by the list of cells timed before it, while our compiled
    cells, which recycle their buffers, did not move. Returns whether it took (glibc only)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None or platform.system() != "Linux":
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 1 << 30)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        return False

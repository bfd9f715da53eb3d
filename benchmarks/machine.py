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

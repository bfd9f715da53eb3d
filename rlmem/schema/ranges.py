"""The valid range of the keys every CLI shares (``seed``, ``torch_threads``): one rule per key,
checked by each config as it is built, so that a value out of range fails naming the key and
the range before any work, instead of deep inside numpy, torch or the thread pool.

Torch-free.
"""

from __future__ import annotations

import os

SEED_LIMIT = 2**32
"""Seeds run from 0 to ``SEED_LIMIT - 1``: what numpy's ``SeedSequence`` (non-negative) and
torch's ``manual_seed`` (at most 64 bits) both take, and what gymnasium's ``reset(seed=)``
and the env seeds derived from it hold as one 32-bit word."""

THREADS_PER_CORE = 4
"""``torch_threads`` may reach this many per core: beyond it, threads only contend."""


def check_seed(value: int, key: str = "seed") -> None:
    """Raise a :class:`ValueError` naming ``key`` unless ``0 <= value < 2**32``."""
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(
            f"{key}={value} is out of range: a seed is an integer from 0 to "
            f"{SEED_LIMIT - 1} (2**32 - 1), which numpy's and torch's generators both accept. "
            f"Nothing was started; choose a {key} in that range.")


def thread_limit() -> int:
    """The most ``torch_threads`` this machine takes: :data:`THREADS_PER_CORE` per core."""
    return THREADS_PER_CORE * (os.cpu_count() or 1)


def check_torch_threads(value: int, key: str = "torch_threads") -> None:
    """Raise a :class:`ValueError` naming ``key`` unless ``1 <= value <= thread_limit()``."""
    limit = thread_limit()
    if not 1 <= value <= limit:
        raise ValueError(
            f"{key}={value} is out of range: use 1 to {limit} ({THREADS_PER_CORE} per core of "
            f"this machine's {os.cpu_count() or 1}); more threads only contend for the cores. "
            f"Nothing was started; 1 is fastest for the small batched ops of a rollout.")

"""How a run steps its envs (``vectorization``), and the automatic choice by the machine's cores.

- ``sync``: every env in the trainer's process, stepped between the policy's steps; the
  reference, reproduced bit for bit.
- ``async``: the envs in worker processes (:class:`rlmem.envs.env_workers.EnvWorkers`), in two
  groups: one group steps while the policy acts for the other, so the envs and the model use
  different cores.
- ``auto``: ``async`` on at least :data:`ASYNC_MIN_CORES` cores with at least
  :data:`ASYNC_MIN_ENVS` envs, else ``sync`` (:func:`resolve_vectorization`); a run records
  what was chosen.
"""

from __future__ import annotations

import os

AUTO = "auto"
"""The ``vectorization`` that lets the machine choose."""

ASYNC_MIN_CORES = 4
"""The fewest usable cores ``auto`` steps the envs in workers on. Each step hands every group
from the trainer to its workers and back, and each hand-over needs the process woken to get a
core at once: on the 2-core machine of issue 32, shared with other jobs (load 5-8), ``async``
ran 0.6-0.8x as fast as ``sync`` (benchmarks/compare_commits.py), so with fewer cores ``auto``
keeps ``sync``. Ask for ``async`` to use it on any machine."""

ASYNC_MIN_ENVS = 8
"""The fewest envs ``auto`` steps in workers: two groups of at least four, below which a
step's messages between the processes cost about what the overlap saves."""

ASYNC_GROUPS = 2
"""Groups of envs in ``async``: one steps while the policy acts for the other."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def resolve_vectorization(choice: str, num_envs: int, cores: int | None = None) -> str:
    """``choice``, with ``auto`` decided: ``async`` on at least :data:`ASYNC_MIN_CORES` cores
    with at least :data:`ASYNC_MIN_ENVS` envs, else ``sync``. Other values are returned as
    they are."""
    if choice != AUTO:
        return choice
    cores = usable_cores() if cores is None else cores
    return "async" if cores >= ASYNC_MIN_CORES and num_envs >= ASYNC_MIN_ENVS else "sync"


def worker_count(num_envs: int, cores: int | None = None) -> int:
    """Worker processes for ``async``: one per core but the trainer's own, at least one, and
    no more than the envs of a group."""
    cores = usable_cores() if cores is None else cores
    return max(1, min(cores - 1, num_envs // ASYNC_GROUPS))

"""The engines' Triton kernels (the GPU path), and when they run.

On the CPU the engines run their compiled loops (:mod:`..compiled`), else their Python loops;
on CUDA the Python loops make dozens of small kernel launches per time step, each waiting on
the last. The modules of this package fuse what runs between the large matrix products of a
step (cuBLAS keeps those) into one Triton kernel or a few, forward and backward, with the resets
applied inside them by the one rule of :mod:`rlmem.cells.resets`. Each is proven equal to the
cell's ``scan(step)`` in float64 by ``tests/cells/test_engines.py``: on the CPU through
Triton's interpreter, on CUDA where a GPU is present.

When they run, decided by :func:`kernels` (through :func:`runs`) for each chunk an engine is
given:

- on CUDA, where Triton imports and the dtype is float32 or float64 (:data:`DTYPES`);
- on the CPU only when asked for: ``RLMEM_TRITON=interpret`` with ``TRITON_INTERPRET=1`` set
  before Triton's first import (the tests; the interpreter is orders of magnitude slower than
  the compiled loops);
- never with ``RLMEM_TRITON=0`` (the Python loops run on CUDA too, as before).

A chunk the kernels cannot take (no Triton, another dtype, a shape an engine's kernels do not
cover) runs the Python loops, and :func:`fallback` says so once per engine and reason, never
silently. (A kernel that Triton cannot build for the GPU at hand raises Triton's error, naming
the kernel; ``tests/kernels_for_sm90.py`` compiles the kernels for the H200 on a machine without
a GPU, so that such a kernel shows in the tests first.) Triton is imported only by the kernel
modules, so that ``import rlmem`` never imports it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import os
from collections.abc import Callable
from types import ModuleType

import torch
from torch import Tensor

_LOG = logging.getLogger(__name__)

VARIABLE = "RLMEM_TRITON"
"""``0``: never run the kernels; ``interpret``: run them on the CPU too, through Triton's
interpreter (needs ``TRITON_INTERPRET=1``); unset or ``auto``: on CUDA."""

DTYPES = (torch.float32, torch.float64)
"""The dtypes the kernels compute in (float64 for the equality tests)."""


@functools.cache
def triton_installed() -> bool:
    """Whether Triton can be imported (it comes with torch's CUDA wheels on Linux)."""
    return importlib.util.find_spec("triton") is not None


@functools.cache
def fallback(engine: str, reason: str) -> None:
    """Say, once per process for each ``engine`` and ``reason``, that a chunk runs the Python
    loops instead of the kernels, and why."""
    _LOG.warning("rlmem: %s runs its Python loops, not its Triton kernels: %s", engine, reason)


INTERPRET = "interpret"
"""The :data:`VARIABLE` setting that runs the kernels on the CPU, through Triton's interpreter."""


def interpreting() -> bool:
    """Whether CPU tensors may run the kernels through Triton's interpreter
    (``RLMEM_TRITON=interpret``). The interpreter patches Triton's language module while a
    kernel runs, so it runs one kernel at a time: callers that would run the cells in several
    threads run them in one."""
    return os.environ.get(VARIABLE, "auto") == INTERPRET


def runs(like: Tensor, engine: str) -> bool:
    """Whether ``engine``'s Triton kernels compute a chunk whose tensors are like ``like``
    (device, dtype); where they cannot, :func:`fallback` says why."""
    setting = os.environ.get(VARIABLE, "auto")
    if setting == "0":
        return False
    if like.device.type == "cpu":
        if setting != INTERPRET:
            return False
        if os.environ.get("TRITON_INTERPRET") != "1":
            fallback(engine, f"{VARIABLE}=interpret needs TRITON_INTERPRET=1 in the "
                             f"environment before Triton's first import")
            return False
    elif like.device.type != "cuda":
        return False
    if not triton_installed():
        fallback(engine, "Triton is not installed (pip install triton)")
        return False
    if like.dtype not in DTYPES:
        fallback(engine, f"the kernels compute in float32 or float64, not {like.dtype}")
        return False
    return True



def kernels(like: Tensor, engine: str,
            uncovered: Callable[[ModuleType], str | None] | None = None) -> ModuleType | None:
    """The module of ``engine``'s kernels (this package's module of the engine's name, which
    imports Triton: only here, only when they run), where they compute a chunk like ``like``
    (:func:`runs`) and ``uncovered`` (given the module: the chunk's shapes against its limits)
    finds no reason they cannot; else ``None``, with :func:`fallback` saying why."""
    if not runs(like, engine):
        return None
    module = importlib.import_module(f"{__name__}.{engine}")
    reason = uncovered(module) if uncovered is not None else None
    if reason is not None:
        fallback(engine, reason)
        return None
    return module

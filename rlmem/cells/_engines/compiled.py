"""The compiled time loops (``csrc/``), built at first use, and when the Python loops run instead.

The engines' hand-written loops (:mod:`.tarnn`, :mod:`.screened`, :mod:`.full_attention`)
make dozens of small ATen calls per time step; at batch 16 calling one from Python costs about
as much as running it. ``csrc/`` makes the same calls from C++: one file per engine, compiled
as one translation unit (``loops.cpp`` includes the others). It also holds pieces that are
not a cell's: MiniGrid's grid encoder as table lookups (``grid_fold.h``,
:mod:`rlmem.agents.grid_fold`), which falls back to the encoder's modules as the engines fall
back to their Python loops, and the MiniGrid tensor envs' step and view (``minigrid.h``,
:mod:`rlmem.envs.tensor.minigrid`), which fall back to their tensor ops. It is compiled with
:func:`torch.utils.cpp_extension.load` the first time a cell needs it in a process (a few tens
of seconds, once: the build is cached in torch's extension directory, ``TORCH_EXTENSIONS_DIR``
or ``~/.cache/torch_extensions``, under a name that changes with the sources, see
:func:`build_name`), so ``pip install -e .`` needs no build step.

Where it cannot be used, the engines run their Python loops, which compute the same thing:

- ``RLMEM_NO_EXTENSION=1`` in the environment (read at every call, so a test can switch);
- a tensor on a device other than the CPU (the Python loops are the GPU path);
- a failed build (no compiler, say): one warning, then the Python loops for the rest of the
  process.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import platform
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

_LOG = logging.getLogger(__name__)
"""Says, before the first build, that it may take a while (the CLIs show INFO messages;
elsewhere :func:`announce` prints to stderr)."""

DISABLE_VARIABLE = "RLMEM_NO_EXTENSION"
"""Set to a value other than ``""`` or ``"0"`` to run the Python loops only."""

SOURCES = Path(__file__).with_name("csrc")
"""The C++ sources of the compiled loops: one file per engine (``*.h``), and ``loops.cpp``, the
one translation unit, which includes them and registers the ops."""

MAIN = SOURCES / "loops.cpp"
"""The file the compiler is given."""

LIBRARY = "rlmem_loops"
"""The name the ops are registered under: ``torch.ops.rlmem_loops``."""


def enabled() -> bool:
    """Whether the environment allows the compiled loops (``RLMEM_NO_EXTENSION`` unset or 0)."""
    return os.environ.get(DISABLE_VARIABLE, "") in ("", "0")


AVX2_FLAGS = ["-mavx2", "-mfma", "-DCPU_CAPABILITY_AVX2", "-DCPU_CAPABILITY=AVX2"]
"""With these, ATen's vector types (``at::vec``, the loops' sigmoid) use AVX2, as ATen's own
kernels do; only where the CPU has it."""


def compile_flags() -> list[str]:
    """``-O3``, vectorised row loops (``omp simd``, no OpenMP runtime), and AVX2 + FMA when
    this machine's CPU reports both (x86 Linux); the build is cached per set of flags."""
    flags = ["-O3", "-fopenmp-simd"]
    try:
        cpu = Path("/proc/cpuinfo").read_text()
    except OSError:
        return flags
    reported = {word for line in cpu.splitlines() if line.startswith("flags")
                for word in line.split(":", 1)[1].split()}
    return flags + AVX2_FLAGS if {"avx2", "fma"} <= reported else flags


def build_name(flags: list[str]) -> str:
    """The build's name (its directory in the cache): ``rlmem_loops_`` and a digest of the
    sources, the flags, torch's version and Python's. Checkouts of different versions of rlmem
    on one machine share the cache; torch, finding a build of the same name under way, waits for it
    and loads it, so each version needs a name of its own. A library of that name whose build
    is marked whole (:data:`BUILT_SUFFIX`) is that build: later processes load it directly,
    without torch's ninja check and its lock file (which a process killed while holding it
    would leave behind)."""
    digest = hashlib.sha256()
    for source in sorted(SOURCES.glob("*.[ch]*")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(" ".join([*flags, torch.__version__, platform.python_version()]).encode())
    return f"{LIBRARY}_{digest.hexdigest()[:12]}"


def announce(message: str) -> None:
    """Say ``message`` where the user sees it: as an INFO record where logging shows those (the
    CLIs: Hydra's logging prints them, into the run's output), else as one line on stderr (a
    script or notebook using the cells, where Python drops INFO records), never both."""
    if _LOG.isEnabledFor(logging.INFO) and _LOG.hasHandlers():
        _LOG.info(message)
    else:
        print(message, file=sys.stderr, flush=True)


BUILT_SUFFIX = ".built"
"""The file beside a build's library that says it is whole: written once the build has loaded.
A process that finds it loads the library directly; one that finds the library alone goes
through torch's build, which waits for a process still building it (a library read while the
linker wrote it aborted a process of the test suite: two processes had started the same new
build)."""

_BUILDING = threading.Lock()
"""Held while :func:`_build` runs or returns its cached result: one build, one load."""


@functools.cache
def _build() -> Any | None:
    """Compile (or load from the cache) ``csrc/`` once per process; ``None`` if it fails."""
    try:
        from torch.utils import cpp_extension

        flags = compile_flags()
        name = build_name(flags)
        directory = Path(os.environ.get("TORCH_EXTENSIONS_DIR")
                         or cpp_extension.get_default_build_root()) / name
        library, built = directory / f"{name}.so", directory / f"{name}{BUILT_SUFFIX}"
        if built.exists():  # built from this very source and flags: no ninja, no lock
            torch.ops.load_library(str(library))
        else:  # torch's build: it waits for another process building the same name
            announce(f"rlmem: compiling the C++ time loops for this machine (first run only, "
                     f"up to a minute or two; cached in {directory}) ...")
            directory.mkdir(parents=True, exist_ok=True)
            cpp_extension.load(name, [str(MAIN)], extra_cflags=flags,
                               build_directory=str(directory), is_python_module=False,
                               verbose=False)
            built.touch()
        return getattr(torch.ops, LIBRARY)
    except Exception as error:  # any failure to build means the fallback, not a crash
        lines = str(error).strip().splitlines() or [""]
        reason = next((line for line in lines if "error" in line.lower()), lines[0])
        warnings.warn(f"rlmem: the compiled time loops could not be built "
                      f"({type(error).__name__}: {reason.strip()[:300]}); the cells "
                      f"run their Python loops (set {DISABLE_VARIABLE}=1 to skip the build)",
                      RuntimeWarning, stacklevel=3)
        return None


_built: list[Any | None] = []
""":func:`_build`'s result once it has returned: read without the lock (an acting step asks
for the ops several times, each a microsecond or so beside kernels of a few)."""


def forget_build() -> None:
    """Forget the build and its result, so that the next use builds (or loads) it again (the
    tests of the build)."""
    _build.cache_clear()
    _built.clear()


def ops(like: Tensor) -> Any | None:
    """The compiled ops for tensors like ``like``, or ``None`` for the Python loops: when
    disabled, off the CPU, or when the build failed."""
    if not like.is_cpu or not enabled():
        return None
    if _built:
        return _built[0]
    with _BUILDING:  # the first calls may come from several threads (a PPO update's parts)
        native = _build()
        if not _built:
            _built.append(native)
        return native


def blocked_ops(like: Tensor) -> Any | None:
    """:func:`ops` for float32 tensors like ``like`` where their ``product`` takes the blocked
    AVX-512 loop (``csrc/blocked_product.h``: a CPU that has it), else ``None``."""
    native = ops(like)
    if native is None or like.dtype != torch.float32 or not _blocked_available(native):
        return None
    return native


@functools.cache
def _blocked_available(native: Any) -> bool:
    """Whether this CPU runs the blocked product, asked once."""
    return bool(native.blocked_product_available())

"""Compile a Triton kernel for the H200 (``sm_90``) on a machine without a GPU, and read what
the hardware would be asked for: shared memory, registers per thread and register spills.

Triton compiles ahead of time for a named target without a driver
(``triton.compile(ASTSource(...), target=GPUTarget("cuda", 90, 32))``, the stages TTIR →
TTGIR → LLVM → PTX → cubin); ``ptxas`` (shipped with Triton's wheel) reports the registers and
spills, which Triton itself reads only from a driver when it loads the cubin. So a kernel that
needs more shared memory than a block may have, or that spills its register tiles to local
memory, shows here, before any GPU run.

The kernels' own module must be built outside the interpreter (``TRITON_INTERPRET`` decides
at ``@triton.jit`` time what a kernel is): :func:`compiled_module` loads a private copy of it
with the variable unset, whatever the test session has set.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

SHARED_LIMIT = 232448
"""The most shared memory (bytes) a block may have on the H200 (sm_90, opt-in)."""
CAPABILITY = 90
WARP_SIZE = 32


@dataclass(frozen=True)
class Compiled:
    """What one compiled kernel asks of an sm_90 GPU."""

    shared: int
    """Shared memory per block, bytes."""
    registers: int
    """Registers per thread."""
    spill_stores: int
    """Bytes of registers spilled to local memory (stores), per thread."""
    spill_loads: int
    """Bytes read back from those spills, per thread."""
    warps: int

    @property
    def spills(self) -> int:
        return self.spill_stores + self.spill_loads


@contextlib.contextmanager
def _without_interpreter() -> Iterator[None]:
    saved = os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["TRITON_INTERPRET"] = saved


def compiled_module(name: str) -> ModuleType:
    """A private copy of module ``name`` whose ``@triton.jit`` kernels are compilable
    (built with ``TRITON_INTERPRET`` unset); the imported module is left as it is."""
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    copy_name = f"_sm90_{name.replace('.', '_')}"
    if copy_name in sys.modules:
        return sys.modules[copy_name]
    copy_spec = importlib.util.spec_from_file_location(copy_name, spec.origin)
    assert copy_spec is not None and copy_spec.loader is not None
    module = importlib.util.module_from_spec(copy_spec)
    sys.modules[copy_name] = module  # dataclasses and triton look their module up by name
    with _without_interpreter():
        copy_spec.loader.exec_module(module)
    return module


def ptxas() -> str | None:
    """The path of the ptxas Triton uses (its wheel ships one), or ``None`` where there is
    none: without it nothing compiles to a cubin, and registers and spills are unknown."""
    from triton import knobs

    try:
        return str(knobs.nvidia.ptxas.path)
    except RuntimeError:
        return None


def _ptxas_report(ptx: str) -> tuple[int, int, int]:
    """Registers, spill stores and spill loads (bytes) of ``ptx`` compiled by ptxas for
    sm_90a, as Triton compiles it (``ptxas -v``)."""
    from triton.backends.nvidia.compiler import sm_arch_from_capability

    with tempfile.TemporaryDirectory() as folder:
        source = os.path.join(folder, "kernel.ptx")
        with open(source, "w") as file:
            file.write(ptx)
        result = subprocess.run(
            [str(ptxas()), "-v", f"--gpu-name={sm_arch_from_capability(CAPABILITY)}",
             source, "-o", os.path.join(folder, "kernel.cubin")],
            capture_output=True, text=True, check=True)
    log = result.stderr
    registers = re.search(r"Used (\d+) registers", log)
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert registers is not None and spills is not None, log
    return int(registers.group(1)), int(spills.group(1)), int(spills.group(2))


def compile_for_sm90(kernel: Any, dtype: str, constexprs: dict[str, Any],
                     types: dict[str, str] | None = None, num_warps: int = 4,
                     num_stages: int = 3) -> Compiled:
    """Compile ``kernel`` (a ``triton.jit`` function of a :func:`compiled_module`) for sm_90.

    Every argument not in ``constexprs`` or ``types`` is a pointer to ``dtype`` (Triton's
    names: ``"fp32"``, ``"fp64"``); ``types`` gives the others (``"*i64"``, ``"*i1"`` for a
    bool tensor, ``"i32"`` for an integer). Raises what Triton raises when it cannot compile
    (a pass's failure, ptxas's error).
    """
    import triton
    from triton.backends.compiler import GPUTarget

    types = types or {}
    signature = {
        name: "constexpr" if name in constexprs else types.get(name, f"*{dtype}")
        for name in kernel.arg_names}
    with _without_interpreter():
        compiled = triton.compile(
            triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
            target=GPUTarget("cuda", CAPABILITY, WARP_SIZE),
            options={"num_warps": num_warps, "num_stages": num_stages})
    registers, stores, loads = _ptxas_report(compiled.asm["ptx"])
    return Compiled(shared=compiled.metadata.shared, registers=registers, spill_stores=stores,
                    spill_loads=loads, warps=num_warps)

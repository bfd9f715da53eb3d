"""Relevancy screening's Triton kernels compiled for the H200 (sm_90) on this machine, without
a GPU (:mod:`kernels_for_sm90`): every kernel, float32 and float64, hidden 128 and 256,
``ν = ρ = 5`` and ``ν + ρ = 20``, with the block sizes and warps the engine launches with.
Each compiles (Triton's passes and ptxas) within a block's shared memory. ptxas spills no
register where the kernels are meant to run fast (float32; at hidden 256 with ``ν = ρ = 5``)
nor at the equality tests' float64 hidden 128; the larger float64 tiles spill (slower, still
correct), which :func:`test_compiles_for_sm90` prints."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("triton")

from kernels_for_sm90 import SHARED_LIMIT, Compiled, compile_for_sm90, compiled_module, ptxas

pytestmark = pytest.mark.skipif(ptxas() is None, reason="no ptxas (it comes with Triton's wheel)")

_INTEGERS = {"p": "i32", "batch": "i32", "target_ptr": "*i64"}
_ROLLOUT_TYPES = {"batch": "i32", "reset_ptr": "*i1", "t_ptr": "*i64", "t_out_ptr": "*i64",
                  "slot_time_ptr": "*i64"} | {
    f"{field}_{memory}_{way}": kind for field, kind in (("valid", "*i1"), ("time", "*i64"))
    for memory in "sr" for way in ("in", "out")}
_VARIANTS = ("forward lstm saving", "forward rnn normalised", "backward lstm",
             "backward rnn", "rollout lstm", "rollout rnn")


def _compile(variant: str, dtype: str, hidden: int, nu: int, rho: int) -> Compiled:
    """One kernel of :mod:`rlmem.cells._engines.gpu.screened` as the engine launches it on a
    GPU (a program per batch item)."""
    kernels = compiled_module("rlmem.cells._engines.gpu.screened")
    blocks = kernels.step_blocks(hidden, nu + rho, 1)
    warps = blocks.pop("num_warps")
    way, base = variant.split()[:2]
    lstm = base == "lstm"
    shape: dict[str, Any] = {"H": hidden, "N": nu + rho, "G": 4 * hidden if lstm else hidden,
                             "LSTM": lstm, **blocks}
    if way == "forward":
        normalised = variant.endswith("normalised")
        kernel, types = kernels._forward_step, _INTEGERS
        shape |= {"NU": nu, "NORMALISED": normalised, "UNIFORM": 0.1 if normalised else 0.0,
                  "SAVE": variant.endswith("saving")}
    elif way == "backward":
        kernel, types = kernels._backward_step, _INTEGERS
        shape |= {"HAS_NEXT": True}
    else:
        kernel, types = kernels._rollout_step, _ROLLOUT_TYPES
        shape |= {"NU": nu}
    return compile_for_sm90(kernel, dtype, shape, types, num_warps=warps)


def _spill_free(dtype: str, hidden: int, nu: int, rho: int) -> bool:
    """Where ptxas must spill nothing: float32 at hidden 128, and at 256 with ``ν = ρ = 5``;
    float64 (the equality tests) at hidden 128 with ``ν = ρ = 5``."""
    small = nu + rho <= 10
    return (hidden <= 128 or small) if dtype == "fp32" else (hidden <= 128 and small)


def _check(variant: str, dtype: str, hidden: int, nu: int, rho: int) -> Compiled:
    compiled = _compile(variant, dtype, hidden, nu, rho)
    assert compiled.shared <= SHARED_LIMIT, compiled
    if _spill_free(dtype, hidden, nu, rho):
        assert compiled.spills == 0, compiled
    return compiled


def compiled_elsewhere(request: pytest.FixtureRequest) -> bool:
    """Under Triton's interpreter (``tests/conftest.py`` sets it on a machine without a GPU),
    Triton's own language was built interpreted and cannot compile a kernel: run this test in
    a process of its own without the interpreter, and say whether it did so."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    environment = os.environ | {"TRITON_INTERPRET": "0"}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-o", "addopts=", "-m", "slow or not slow", request.node.nodeid],
                            cwd=request.config.rootpath, env=environment, capture_output=True,
                            text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return True


def test_forward_compiles_for_sm90(request: pytest.FixtureRequest) -> None:
    """The training step's forward kernel, float32, hidden 128 (the issue's benchmark)."""
    if not compiled_elsewhere(request):
        _check("forward lstm saving", "fp32", 128, 5, 5)


@pytest.mark.slow
@pytest.mark.parametrize("variant", _VARIANTS)
@pytest.mark.parametrize("dtype", ["fp32", "fp64"])
@pytest.mark.parametrize("hidden", [128, 256])
@pytest.mark.parametrize(("nu", "rho"), [(5, 5), (10, 10)])
def test_compiles_for_sm90(variant: str, dtype: str, hidden: int, nu: int, rho: int,
                           capsys: pytest.CaptureFixture[str],
                           request: pytest.FixtureRequest) -> None:
    """Each kernel; its shared memory, registers and spills printed for the record."""
    if compiled_elsewhere(request):
        return
    compiled = _check(variant, dtype, hidden, nu, rho)
    with capsys.disabled():
        print(f"\nH={hidden} ν={nu} ρ={rho} {dtype} {variant}: shared {compiled.shared} B, "
              f"{compiled.registers} registers, spills {compiled.spill_stores}/"
              f"{compiled.spill_loads} B")

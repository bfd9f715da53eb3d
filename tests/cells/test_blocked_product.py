"""The blocked float32 product of the compiled loops (``csrc/blocked_product.h``): within float32
rounding of a float64 product for every remainder of rows (groups of 8) and columns (blocks of
32, the rest masked), transposed and strided left operands, a right operand read by rows or
copied so, a full or broadcast addend; ATen's product where the CPU lacks AVX-512 or the dtype
is not float32."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rlmem.cells._engines import compiled


@pytest.fixture(scope="module")
def ops() -> object:
    native = compiled.ops(torch.zeros(1))
    if native is None:
        pytest.skip("the compiled loops are not available here")
    return native


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 17])
@pytest.mark.parametrize("columns", [1, 15, 16, 17, 32, 33, 100])
def test_every_remainder_within_rounding(ops: object, rows: int, columns: int) -> None:
    torch.manual_seed(rows * 100 + columns)
    a, b = torch.randn(rows, 37), torch.randn(37, columns)
    add = torch.randn(rows, columns)
    for addend in (None, add, add[0]):
        got = ops.product(a, b, addend)  # type: ignore[attr-defined]
        expected = a.double() @ b.double()
        if addend is not None:
            expected = expected + addend.double()
        assert got.dtype == torch.float32 and got.shape == (rows, columns)
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-5)


def test_operand_layouts(ops: object) -> None:
    """a transposed (a weight gradient's dzᵀ) or a column slice, b transposed (copied by rows
    first) or a row slice of a wider matrix."""
    torch.manual_seed(0)
    wide = torch.randn(40, 70)
    a_t, a_slice = torch.randn(50, 24).t(), wide[:24, 5:55]
    b_t, b_slice = torch.randn(64, 50).t(), torch.randn(50, 90)[:, 3:67]
    for a in (a_t, a_slice):
        for b in (b_t, b_slice):
            got = ops.product(a, b, None)  # type: ignore[attr-defined]
            torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=1e-5,
                                       atol=1e-5)


def test_an_empty_inner_dimension_gives_the_addend(ops: object) -> None:
    add = torch.randn(3, 20)
    got = ops.product(torch.zeros(3, 0), torch.zeros(0, 20), add)  # type: ignore[attr-defined]
    assert torch.equal(got, add)


def test_float64_is_atens_product_bit_for_bit(ops: object) -> None:
    torch.manual_seed(0)
    a, b, bias = (torch.randn(9, 13, dtype=torch.float64), torch.randn(13, 33,
                  dtype=torch.float64), torch.randn(33, dtype=torch.float64))
    assert torch.equal(ops.product(a, b, bias), torch.addmm(bias, a, b))  # type: ignore[attr-defined]
    assert torch.equal(ops.product(a, b, None), torch.mm(a, b))  # type: ignore[attr-defined]


def test_availability_follows_the_cpu_and_atens_kernels(ops: object) -> None:
    """The loop runs where the CPU has AVX-512 and ATen's kernels take it (which
    ``ATEN_CPU_CAPABILITY=avx2`` narrows: the bit-exact reference's fixture test does so)."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.skip("no /proc/cpuinfo to compare with")
    reported = "avx512f" in cpuinfo.read_text().split()
    atens = torch.backends.cpu.get_cpu_capability() == "AVX512"
    assert bool(ops.blocked_product_available()) == (reported and atens)  # type: ignore[attr-defined]


def test_a_process_narrowed_to_avx2_runs_no_wider_loop() -> None:
    """With ``ATEN_CPU_CAPABILITY=avx2`` (as the sync fixture's rerun narrows a process) the
    compiled loops report no blocked loop and no wide exponential."""
    code = ("import torch; from rlmem.cells._engines import compiled; "
            "ops = compiled.ops(torch.zeros(1)); "
            "print(bool(ops.blocked_product_available()), bool(ops.wide_exp_found()))")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=600, check=True)
    assert result.stdout.split()[-2:] == ["False", "False"]


def test_the_wide_exponential_is_torchs_where_the_loop_runs(ops: object) -> None:
    """The LSTM chunk's σ takes SLEEF's 16-wide exponential from torch's own library where the
    blocked loop runs (torch's CPU wheels up to the pinned release export it); elsewhere it
    is not looked for."""
    found = bool(ops.wide_exp_found())  # type: ignore[attr-defined]
    assert found == bool(ops.blocked_product_available())  # type: ignore[attr-defined]


def test_shapes_that_do_not_multiply_are_refused(ops: object) -> None:
    with pytest.raises(RuntimeError):
        ops.product(torch.zeros(3, 4), torch.zeros(5, 6), None)  # type: ignore[attr-defined]

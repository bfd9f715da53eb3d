"""benchmarks/lstm_chunk_kernel.py and benchmarks/blocked_products.py: what each compares."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
from benchmark_scripts import load_benchmark

from rlmem.cells._engines import compiled


@pytest.fixture(scope="module")
def chunk_bench() -> Iterator[ModuleType]:
    yield from load_benchmark("lstm_chunk_kernel")


@pytest.fixture(scope="module")
def products_bench() -> Iterator[ModuleType]:
    yield from load_benchmark("blocked_products")


def test_the_chunk_benchmark_times_both_kernels_on_one_chunk(chunk_bench: ModuleType) -> None:
    if compiled.ops(torch.zeros(1)) is None:
        pytest.skip("the compiled loops are not available here")
    fused, chunk, taken = chunk_bench.chunk_calls("4x3x5x6")
    for train in (True, False):
        fused(train)
        chunk(train)
    assert taken is (compiled.blocked_ops(torch.zeros(1)) is not None)  # 4·3·6 is small
    times = chunk_bench.medians({"a": lambda: None, "b": lambda: None}, 2, 1)
    assert set(times) == {"a", "b"} and all(value >= 0 for value in times.values())


@pytest.mark.parametrize("backward", [False, True])
def test_the_products_benchmark_calls_each_side(products_bench: ModuleType,
                                                backward: bool) -> None:
    for blocked in (False, True):
        products_bench.product_call((4, 3, 2), blocked, backward)()

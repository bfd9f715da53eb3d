"""benchmarks/onednn_linear.py: each shape's four timings."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from load_benchmark("onednn_linear")


def test_a_shape_is_timed_forward_and_backward_both_ways(bench: ModuleType) -> None:
    timed = bench.time_shape(64, 8, 4, repeats=2)
    assert set(timed) == {"torch fwd", "onednn fwd", "torch both", "onednn both"}
    assert all(value > 0 for value in timed.values())

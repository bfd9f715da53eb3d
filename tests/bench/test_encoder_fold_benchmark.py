"""benchmarks/encoder_fold.py: the folded encoder it times computes what the module does."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
from benchmark_scripts import load_benchmark

from rlmem.agents.minigrid_encoders import FULL_VIEW, ImageEncoder


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from load_benchmark("encoder_fold")


def test_the_folded_form_equals_the_module_in_float64(bench: ModuleType) -> None:
    torch.manual_seed(1)
    encoder = ImageEncoder((FULL_VIEW, FULL_VIEW, 3))
    output, gradient = bench.largest_differences(encoder, bench.grids(16))
    assert output < 1e-12 and gradient < 1e-12


"""benchmarks/tensor_popgym_speed.py runs: both backends, tiny sizes, a short time each."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark

pytest.importorskip("popgym")


@pytest.fixture
def benchmark() -> Iterator[ModuleType]:
    yield from load_benchmark("tensor_popgym_speed")


def test_it_times_both_backends(benchmark: ModuleType,
                                capsys: pytest.CaptureFixture[str]) -> None:
    benchmark.main(["--envs", "RepeatPreviousEasy", "PositionOnlyPendulumEasy",
                    "BattleshipEasy", "--sizes", "2", "--rounds", "1", "--seconds", "0.01"])
    out = capsys.readouterr().out
    assert "load average" in out and "medians over the rounds" in out
    for name in ("RepeatPreviousEasy", "PositionOnlyPendulumEasy", "BattleshipEasy"):
        assert f"{name:28s}      2 envs  popgym" in out
    assert out.count("tensor-cpu") == 6  # three envs, once per round and once in the summary

"""benchmarks/tensor_env_speed.py at tiny sizes: every backend steps and the table has a row
per env and size."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    yield from load_benchmark("tensor_env_speed")


def test_prints_a_row_per_env_and_size(bench: ModuleType,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    bench.main(["--envs", "DoorKey-5x5", "MemoryS7", "--num-envs", "2", "3", "--rounds", "1",
                "--block-seconds", "0.01", "--max-reference-envs", "2"])
    out = capsys.readouterr().out
    rows = [line.split("|")[1:-1] for line in out.splitlines()
            if line.startswith(("| DoorKey-5x5 ", "| MemoryS7 "))]
    assert [(row[0].strip(), row[1].strip()) for row in rows] == [
        ("DoorKey-5x5", "2"), ("DoorKey-5x5", "3"), ("MemoryS7", "2"), ("MemoryS7", "3")]
    for row in rows:
        references = [row[2].strip(), row[3].strip()]
        assert float(row[4].replace(",", "")) > 0  # the tensor envs always run
        # the references run up to --max-reference-envs envs only
        assert (references == ["nan", "nan"]) == (row[1].strip() == "3")
    assert "load average" in out

"""A value out of range fails naming its key and the range, before any work, in every CLI that
has the key (issue 28, "Messages"): ``seed`` (train, supervised and evaluate alike),
``torch_threads``, and a ``memory.hidden_size`` whose training state cannot fit in memory."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli

from rlmem.schema.ranges import SEED_LIMIT, thread_limit

SUPERVISED = ["seq_len=4", "batch_size=2", "iterations=2", "memory.hidden_size=8",
              "progress_bar=false", "figures=false"]


def refused(module: str, *args: str, tmp_path: Path) -> str:
    """Run ``module`` with ``args``; it must fail with one message and write nothing."""
    run_dir = tmp_path / "run"
    result = run_cli(module, *args, f"run_dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not run_dir.exists()
    return result.stderr


@pytest.mark.parametrize("module, args", [
    ("rlmem.train", [*TINY_PPO, "seed=-1"]),
    ("rlmem.train", [*TINY_PPO, f"seed={2**70}"]),
    ("rlmem.supervised", [*SUPERVISED, "seed=-1"]),
], ids=["train -1", "train 2**70", "supervised -1"])
def test_a_seed_out_of_range_is_named_with_the_range(module: str, args: list[str],
                                                     tmp_path: Path) -> None:
    stderr = refused(module, *args, tmp_path=tmp_path)
    assert "seed=" in stderr and "is out of range" in stderr
    assert f"from 0 to {SEED_LIMIT - 1}" in stderr


def test_evaluate_names_a_seed_out_of_range_before_reading_the_run(tmp_path: Path) -> None:
    result = run_cli("rlmem.evaluate", f"run={tmp_path / 'nowhere'}", "seed=-1", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "rlmem.evaluate: error: seed=-1 is out of range" in result.stderr


def test_too_many_torch_threads_name_the_key_and_the_cores(tmp_path: Path) -> None:
    stderr = refused("rlmem.train", *TINY_PPO, "torch_threads=100000", tmp_path=tmp_path)
    assert f"torch_threads=100000 is out of range: use 1 to {thread_limit()}" in stderr


@pytest.mark.parametrize("module, args", [
    ("rlmem.train", TINY_PPO),
    ("rlmem.supervised", SUPERVISED),
], ids=["train", "supervised"])
@pytest.mark.parametrize("size, estimate", [
    (10_000_000, r"has 4e\+14 parameters: training it holds at least [\d.]+ PiB .*more than "
                 r"this machine's [\d.]+ [KMGTP]?i?B of memory"),
    (1_000_000_000, "too large for torch even to size its weights"),
])
def test_a_hidden_size_that_cannot_fit_gives_the_estimate(
        module: str, args: list[str], size: int, estimate: str, tmp_path: Path) -> None:
    stderr = refused(module, *args, "memory=lstm", f"memory.hidden_size={size}",
                     tmp_path=tmp_path)
    assert f"memory=lstm with memory.hidden_size={size}" in stderr
    assert re.search(estimate, stderr), stderr
    assert "choose a smaller memory.hidden_size" in stderr

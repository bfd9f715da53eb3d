"""``vectorization=sync`` learns exactly as the start of issue 32 (commit 69447d9) did (it steps
gymnasium's envs, which ``env_backend=auto`` takes wherever ``vectorization`` is set).

Tiny in-process runs of our PPO (lstm and relstm, short episodes so that truncations are
bootstrapped) must write the same ``progress.csv`` numbers, every column but the wall-clock
``fps``, and end with the same weights (a SHA-256 over every tensor of the model's state), bit
for bit, as the fixture that commit 69447d9 wrote. Any speed-up of the sync path that changes a
floating-point result, however slightly, fails here.

Bit-for-bit holds only for the torch build and CPU kernels that wrote the fixture (its
``written_with``): another torch version, or another vector instruction set, sums in another
order. On a CPU with wider vectors than the fixture's (AVX-512 where it was written with AVX2)
the case reruns in a process whose kernels are narrowed to the fixture's (ATen's, oneDNN's and
MKL's, by their environment variables). Elsewhere (a CUDA machine with its own torch build,
say) the test is skipped, saying why.

The fixture is written by running this file at that commit (``rlmem`` importable from it)::

    PYTHONPATH=<69447d9 as a package>:tests python tests/agents/test_ppo_sync_fixture.py --write
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from rlmem.runs import load_checkpoint
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.train import train as train_run

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ppo_sync_69447d9.json"
"""The numbers commit 69447d9 wrote, per case."""

COMMON = ["num_envs=4", "frames=384", "agent.frames_per_env=32", "agent.recurrence=8",
          "agent.batch_size=64", "agent.epochs=2", "progress_bar=false", "device=cpu",
          "seed=3", "+env_kwargs.max_steps=12"]
"""Three updates of 128 frames; 12-step episodes, so every update bootstraps truncations."""

CASES = {"lstm": ["memory=lstm"], "relstm": ["memory=relstm", "memory.hidden_size=32"]}
"""Two cells: a two-field state (lstm), and one with slots and a mask (relstm)."""

SKIPPED = frozenset({"fps"})
"""Columns that measure the machine, not the learning."""


def _compose(overrides: list[str]) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=overrides)


def _weights_digest(run_dir: Path) -> str:
    """SHA-256 over the final model's tensors, in key order, as raw bytes."""
    digest = hashlib.sha256()
    weights = load_checkpoint(run_dir / "checkpoint.pt").states["model"]
    for key in sorted(weights):
        digest.update(key.encode())
        digest.update(weights[key].detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def written_here() -> dict[str, str]:
    """The torch build and CPU kernels of this process, as the fixture records its own."""
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def run_case(name: str, run_dir: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """Train case ``name`` into ``run_dir``; its progress rows (without :data:`SKIPPED`) and
    the digest of its final weights."""
    torch.set_num_threads(1)
    train_run(_compose([*COMMON, *CASES[name], *extra]), run_dir)
    with (run_dir / "progress.csv").open(newline="") as file:
        rows = [{key: value for key, value in row.items() if key not in SKIPPED}
                for row in csv.DictReader(file)]
    return {"rows": rows, "weights": _weights_digest(run_dir)}


NARROWED = {"AVX2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
                     "MKL_ENABLE_INSTRUCTIONS": "AVX2"}}
"""Per instruction set a fixture may have been written with, the environment that narrows a
process's CPU kernels to it on a CPU that has more (AVX-512)."""


def narrowed_environment(written_with: dict[str, str]) -> dict[str, str] | None:
    """The environment in which a process computes as the fixture's did, or None if none
    does here (another torch build, or an instruction set this CPU lacks or cannot narrow to)."""
    here = written_here()
    if (written_with["torch"] != here["torch"] or here["cpu_capability"] != "AVX512"
            or written_with["cpu_capability"] not in NARROWED):
        return None
    return {**os.environ, **NARROWED[written_with["cpu_capability"]]}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sync_reproduces_the_start_commit_bit_for_bit(name: str, tmp_path: Path) -> None:
    fixture = json.loads(FIXTURE.read_text())
    if fixture["written_with"] != written_here():
        narrowed = narrowed_environment(fixture["written_with"])
        if narrowed is None:
            pytest.skip(f"the fixture was written with {fixture['written_with']}, this process "
                        f"has {written_here()}: bit-for-bit equality is not defined across them")
        test = f"{__file__}::test_sync_reproduces_the_start_commit_bit_for_bit[{name}]"
        rerun = subprocess.run([sys.executable, "-m", "pytest", test, "-o", "addopts=", "-q",
                                "-p", "no:cacheprovider", "-p", "no:warnings"],
                               env=narrowed, capture_output=True, text=True, timeout=900)
        # "1 passed": a rerun that skipped again would exit 0 having checked nothing
        assert rerun.returncode == 0 and "1 passed" in rerun.stdout, rerun.stdout[-4000:]
        return
    expected = fixture[name]
    got = run_case(name, tmp_path, ("vectorization=sync",))
    assert len(got["rows"]) == len(expected["rows"])
    for index, (row, want) in enumerate(zip(got["rows"], expected["rows"], strict=True)):
        for key, value in want.items():
            assert row.get(key) == value, f"update {index + 1}, column {key}"
    assert got["weights"] == expected["weights"]


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    results: dict[str, Any] = {"written_with": written_here()}
    for case in sorted(CASES):
        with tempfile.TemporaryDirectory() as folder:
            results[case] = run_case(case, Path(folder) / "run")
    FIXTURE.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {FIXTURE}")

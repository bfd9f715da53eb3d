"""Sweeps beyond one machine, actually run: ``hydra/launcher=submitit_local`` runs the code path
of the Slurm launcher (``submitit_slurm``: pickled jobs, one process each, submitit's logs) as
local processes. Each job trains into its own run directory, and a re-launched sweep finds those
directories and resumes instead of restarting.

``hydra-submitit-launcher`` is in the ``dev`` extra (and the ``cluster`` one), so CI runs this.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli
from omegaconf import OmegaConf

from rlmem.runs import load_checkpoint

MEMORIES = ("lstm", "gru")


def _frames(run_dir: Path) -> list[int]:
    with (run_dir / "progress.csv").open(newline="") as file:
        return [int(float(row["frames"])) for row in csv.DictReader(file)]


def _files(run_dir: Path) -> dict[str, bytes]:
    return {name: (run_dir / name).read_bytes()
            for name in ("checkpoint.pt", "progress.csv", "config.yaml")}


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_submitit_sweep_trains_every_job_and_resumes_when_relaunched(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    command = ("rlmem.train", "-m", f"memory={','.join(MEMORIES)}", *TINY_PPO,
               "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=10",
               f"hydra.sweep.dir={sweep}")
    first = run_cli(*command, cwd=tmp_path, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]

    # The default folders: each cell, then TINY_PPO's settings that differ from the defaults.
    runs = {memory: next((sweep / "ppo" / "DoorKey-5x5").glob(f"{memory},*/seed0"))
            for memory in MEMORIES}
    for memory, run_dir in runs.items():
        assert _frames(run_dir) == [32, 64], memory
        assert load_checkpoint(run_dir / "checkpoint.pt").count("frames") == 64
        config = OmegaConf.load(run_dir / "config.yaml")
        assert config.memory.name == memory and config.run_dir == str(run_dir)
    # The jobs ran through submitit: one job folder with its logs per job.
    logs = sorted((sweep / ".submitit").glob("*/*_log.out"))
    assert len(logs) == len(MEMORIES), logs
    before = {memory: _files(run_dir) for memory, run_dir in runs.items()}

    again = run_cli(*command, cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    for memory, run_dir in runs.items():
        assert _files(run_dir) == before[memory], f"{memory} was retrained"
    relaunched = [path for path in (sweep / ".submitit").glob("*/*_log.out")
                  if path not in logs]
    said = "".join(path.read_text() for path in relaunched)
    for run_dir in runs.values():
        assert f"{run_dir} has already trained 64 frames" in said, said[-2000:]

"""Issue 53, "where a paragraph should stand", "messages that are wrong" and "behaviour that
regressed": each fault ends in one true paragraph, never a traceback. Each test drives the real
CLI in a temporary folder and asserts the message and what is on disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import TINY_PPO, run_cli, wait_for
from fault_runs import TINY_SUPERVISED, copy_run, files, one_paragraph, train_tiny
from locations import REPO

from experiments.common.run_config import UnreadableRecordError
from experiments.common.sweep import run_memory
from rlmem.envs import EnvWorkers, env_constructors
from rlmem.envs.env_workers import EnvWorkerDied
from rlmem.evaluate import evaluate_run
from rlmem.runs import load_checkpoint
from rlmem.runs.directory import claim_run_dir
from rlmem.runs.errors import RunDirectoryError, RunError
from rlmem.runs.progress import read_progress
from rlmem.schema.evaluate import EvaluateConfig

LONG = "n" * 300
"""A folder name over the 255 bytes a file name may have."""


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_tiny(tmp_path_factory.mktemp("trained"))


# --- a name or a path too long ------------------------------------------------------------------

@pytest.mark.parametrize(("program", "args", "key"), [
    ("rlmem.train", TINY_PPO, "run_dir"),
    ("rlmem.supervised", TINY_SUPERVISED, "run_dir"),
    ("rlmem.evaluate", [], "run"),
], ids=["train", "supervised", "evaluate"])
def test_a_name_too_long_is_one_paragraph(tmp_path: Path, program: str, args: list[str],
                                          key: str) -> None:
    result = run_cli(program, *args, f"{key}={tmp_path / LONG}", cwd=tmp_path)
    one_paragraph(result, program, f"{key}={tmp_path / LONG} cannot be a run directory",
                  "is 300 bytes long, more than the 255", "Nothing was written")
    assert list(tmp_path.iterdir()) == []


def test_a_path_over_the_systems_limit_is_refused_before_any_work(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d" * 200] * 21)  # 4,200 bytes of names of 200
    with pytest.raises(RunDirectoryError, match=r"bytes a path may have here.*Nothing was "
                                                "written"):
        claim_run_dir(deep)
    assert list(tmp_path.iterdir()) == []


# --- an env worker killed -----------------------------------------------------------------------

def test_a_killed_env_worker_is_a_fault_of_the_surroundings() -> None:
    envs = EnvWorkers(env_constructors("DoorKey-5x5", 2), "DoorKey-5x5", workers=1, groups=1)
    try:
        envs.reset(seed=0)
        os.kill(envs._processes[0].pid, signal.SIGKILL)
        envs._processes[0].join(10)
        with pytest.raises(EnvWorkerDied, match=r"died \(killed by SIGKILL\) while stepping "
                                                r"them, at frame 2: .*resumes the run") as died:
            envs.step_async(0, np.zeros(2, np.int64), "frame 2")
            envs.step_wait(0, "frame 2")
        assert isinstance(died.value, RunError)  # reported by the CLIs in one paragraph
    finally:
        envs.close()


@pytest.mark.slow  # ~30 s: a run in the background, killed at its worker
def test_a_run_whose_env_worker_is_killed_ends_in_one_paragraph(tmp_path: Path) -> None:
    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "rlmem.train", "vectorization=async", "num_envs=4",
         "frames=1000000", "agent.frames_per_env=16", "agent.recurrence=8",
         "agent.batch_size=16", "agent.epochs=1", "progress_bar=false", "device=cpu",
         "memory.hidden_size=8", f"run_dir={run}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (run / "checkpoint.pt").exists())
        children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
        os.kill(int(children[0]), signal.SIGKILL)
        _, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    result = subprocess.CompletedProcess(process.args, process.returncode, "", stderr)
    one_paragraph(result, "rlmem.train", "died (killed by SIGKILL)", "is intact")
    checkpoint = load_checkpoint(run / "checkpoint.pt")  # whole, and finite (it loads)
    assert checkpoint.count("frames") == read_progress(run / "progress.csv")[-1].number("frames")


# --- experiments.common.sweep on a torn config or report ----------------------------------------

def suite_dry_run(root: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("experiments.transfer.suite", "--dry-run", "--runs", str(root), "--envs",
                   "DoorKey-5x5", "--memories", "lstm", "--seeds", "0", cwd=REPO)


def test_a_suite_names_a_config_that_is_no_mapping(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "DoorKey-5x5" / "lstm" / "seed0")
    (run / "config.yaml").write_text("- a\n- b\n")
    before = files(run)
    result = suite_dry_run(tmp_path)
    one_paragraph(result, "experiments.transfer.suite", f"{run / 'config.yaml'} holds a list, "
                  "not the mapping of keys a run's config is", "nothing was changed")
    assert files(run) == before
    (run / "config.yaml").write_text("memory: [1\n")
    with pytest.raises(UnreadableRecordError, match=r"config\.yaml cannot be read as YAML"):
        run_memory(run)


def test_a_suite_evaluates_a_torn_report_again(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "DoorKey-5x5" / "lstm" / "seed0")
    report = run / "eval" / "DoorKey-5x5_sampled_100ep_seed0.json"
    report.parent.mkdir()
    report.write_text('{"env": "DoorKey-5x5", "fra')
    result = suite_dry_run(tmp_path)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"{report} cannot be read as JSON" in result.stdout
    assert f"python -m rlmem.evaluate run={run} env=DoorKey-5x5 episodes=100" in result.stdout


# --- messages that were wrong -------------------------------------------------------------------

def test_a_checkpoint_of_nan_weights_is_named_not_called_good(trained: Path,
                                                              tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    payload = torch.load(run / "checkpoint.pt", weights_only=True)
    first = next(iter(payload["states"]["model"]))
    payload["states"]["model"][first].fill_(float("nan"))
    torch.save(payload, run / "checkpoint.pt")
    before = files(run)
    resumed = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=96",
                      f"run_dir={run}", cwd=tmp_path)
    message = one_paragraph(resumed, "rlmem.train", f"holds model.{first}, which is not finite",
                            "no file of the run was changed")
    assert "last good checkpoint" not in message
    evaluated = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", cwd=tmp_path)
    message = one_paragraph(evaluated, "rlmem.evaluate", f"holds model.{first}, which is not "
                            "finite", "evaluate another run")
    assert "resume=false" not in message and "run_dir" not in message
    assert files(run) == before


def test_evaluate_suggests_only_its_own_keys(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    (run / "checkpoint.pt").write_bytes((run / "checkpoint.pt").read_bytes()[:5000])
    cut = run_cli("rlmem.evaluate", f"run={run}", "episodes=1", cwd=tmp_path)
    message = one_paragraph(cut, "rlmem.evaluate", "is unreadable", "evaluate another run")
    assert "resume=false" not in message and "run_dir" not in message
    linked = copy_run(trained, tmp_path / "linked")
    (linked / "notes.txt").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(RunDirectoryError, match=r"holds symlinks .* Replace the links by the "
                                                r"files themselves\.$") as caught:
        evaluate_run(EvaluateConfig(run=str(linked), episodes=1))
    assert f"run={linked}" in str(caught.value) and "run_dir" not in str(caught.value)
    assert not (tmp_path / "elsewhere.txt").exists()


def test_warm_start_from_an_rl_run_says_what_it_is(trained: Path, tmp_path: Path) -> None:
    result = run_cli("rlmem.supervised", *TINY_SUPERVISED, f"warm_start={trained}",
                     f"run_dir={tmp_path / 'run'}", cwd=tmp_path)
    message = one_paragraph(result, "rlmem.supervised",
                            "is the checkpoint of an RL run (agent=ppo)",
                            "takes the model of a supervised run")
    assert "altered" not in message
    assert not (tmp_path / "run").exists()


# --- progress.csv on resume ---------------------------------------------------------------------

def test_a_zero_byte_progress_csv_resumes(trained: Path, tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    (run / "progress.csv").write_bytes(b"")
    result = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=96",
                     f"run_dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [row.number("frames") for row in read_progress(run / "progress.csv")] == [96.0]
    assert load_checkpoint(run / "checkpoint.pt").count("frames") == 96


def test_a_cell_that_is_no_number_is_named_by_file_line_and_column(trained: Path,
                                                                   tmp_path: Path) -> None:
    run = copy_run(trained, tmp_path / "run")
    lines = (run / "progress.csv").read_text().splitlines(keepends=True)
    lines[2] = "abc" + lines[2][lines[2].index(","):]
    (run / "progress.csv").write_text("".join(lines))
    before = files(run)
    result = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", "frames=96",
                     f"run_dir={run}", cwd=tmp_path)
    one_paragraph(result, "rlmem.train",
                  f"{run / 'progress.csv'}, line 3: column 'frames' holds 'abc', which is no "
                  "number", "Fix or delete that row")
    after = files(run)
    assert after.pop("config.yaml") and before.pop("config.yaml")  # frames=96 recorded
    assert after == before

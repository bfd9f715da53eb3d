"""Runs that nothing can corrupt: one test per fault a user met, asserting the message and that
nothing on disk was lost or corrupted (the table of the issue "runs that nothing can corrupt")."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import TINY_PPO, run_cli, wait_for
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from rlmem import evaluate as evaluate_module
from rlmem.agents.ppo import update as ppo_update
from rlmem.evaluate import evaluate_run
from rlmem.runs import (
    CheckpointWriteError,
    NonFiniteLossError,
    RunDirectoryError,
    UnreadableCheckpointError,
    load_checkpoint,
)
from rlmem.runs import checkpoint as checkpoint_module
from rlmem.runs import lock as lock_module
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.supervised import run as run_supervised
from rlmem.train import train as train_run


def train_config(*overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*TINY_PPO, "memory.hidden_size=8", *overrides])


def supervised_config(*overrides: str) -> DictConfig:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("supervised", overrides=[
            "seq_len=4", "batch_size=2", "iterations=2", "memory.hidden_size=8",
            "eval_every=1", "eval_batch_size=2", "progress_bar=false", "figures=false",
            *overrides])


def snapshot(run_dir: Path) -> dict[str, bytes]:
    """Every file of a run directory, by name (to prove that nothing changed)."""
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def assert_finite_checkpoint(path: Path) -> None:
    checkpoint = load_checkpoint(path)
    for name, state in checkpoint.states.items():
        for key, value in state.items() if name != "optimizer" else ():
            assert torch.isfinite(value).all(), (name, key)


def launch(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "rlmem.train", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


LONG_RUN = ["num_envs=2", "frames=100000", "agent.frames_per_env=16", "agent.recurrence=8",
            "agent.batch_size=16", "agent.epochs=1", "progress_bar=false", "device=cpu",
            "memory.hidden_size=8"]


# 1 ---------------------------------------------------------------------------------------------
@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_second_process_on_the_same_run_dir_stops_at_once(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = launch(*LONG_RUN, f"run_dir={run_dir}", cwd=tmp_path)
    try:
        wait_for(lambda: (run_dir / "progress.csv").exists())
        second = run_cli("rlmem.train", *LONG_RUN, f"run_dir={run_dir}", cwd=tmp_path)
        assert second.returncode == 1
        assert f"is in use by another process (PID {first.pid})" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.kill()  # kill -9: the lock file stays behind, the kernel's lock does not
        first.communicate(timeout=120)
    assert (run_dir / ".lock").exists()
    saved = load_checkpoint(run_dir / "checkpoint.pt").count("frames")
    # A killed holder never blocks: the run resumes, and progress.csv stays continuous.
    again = run_cli("rlmem.train", *LONG_RUN[:1], f"frames={saved + 64}", *LONG_RUN[2:],
                    f"run_dir={run_dir}", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    frames = [float(row.split(",")[0]) for row in
              (run_dir / "progress.csv").read_text().splitlines()[1:]]
    assert frames == [32.0 * (k + 1) for k in range(len(frames))] and frames[-1] >= saved + 64


# 2 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("overrides", [("agent.lr=1e11",), ("memory=irnn", "memory.eta=1e30")])
def test_divergence_never_saves_a_checkpoint_that_cannot_act(overrides: tuple[str, ...],
                                                              tmp_path: Path) -> None:
    cfg = train_config("frames=3072", f"run_dir={tmp_path}", *overrides)
    with pytest.raises(NonFiniteLossError, match=r"diverged|non-finite|is nan") as caught:
        train_run(cfg, tmp_path)
    assert "Traceback" not in str(caught.value) and "multinomial" not in str(caught.value)
    if (tmp_path / "checkpoint.pt").exists():
        assert_finite_checkpoint(tmp_path / "checkpoint.pt")
    with pytest.raises(NonFiniteLossError):  # resuming diverges the same way, cleanly
        train_run(cfg, tmp_path)


def test_sampling_from_non_finite_logits_is_reported_as_divergence() -> None:
    from rlmem.agents.ppo.heads import sample_actions

    with pytest.raises(NonFiniteLossError, match="action logits are NaN or infinite"):
        sample_actions(torch.tensor([[0.0, float("nan")]]))


# 3 ---------------------------------------------------------------------------------------------
def test_a_truncated_checkpoint_is_named_in_train_evaluate_and_supervised(
        tmp_path: Path) -> None:
    rl, supervised = tmp_path / "rl", tmp_path / "supervised"
    train_run(train_config(f"run_dir={rl}"), rl)
    run_supervised(supervised_config(), supervised)
    for run_dir in (rl, supervised):
        os.truncate(run_dir / "checkpoint.pt", 5000)
    before = snapshot(rl)
    message = r"checkpoint.pt is unreadable \(truncated or corrupt\?.*resume=false"
    with pytest.raises(UnreadableCheckpointError, match=message):
        train_run(train_config(f"run_dir={rl}", "frames=96"), rl)
    # rlmem.evaluate has no resume=false (issue 53): it says what it can do.
    with pytest.raises(UnreadableCheckpointError, match=r"checkpoint.pt is unreadable "
                                                        r"\(truncated or corrupt\?.*evaluate "
                                                        "another run"):
        evaluate_run(EvaluateConfig(run=str(rl), episodes=1))
    with pytest.raises(UnreadableCheckpointError, match=message):
        run_supervised(supervised_config("iterations=3"), supervised)
    assert snapshot(rl) == before
    cli = run_cli("rlmem.evaluate", f"run={rl}", "episodes=1", cwd=tmp_path)
    assert cli.returncode == 1 and "is unreadable" in cli.stderr and "Traceback" not in cli.stderr


# 4 ---------------------------------------------------------------------------------------------
def test_an_unwritable_run_dir_stops_before_any_work(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(*args: Any, **kwargs: Any) -> int:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(lock_module.os, "open", read_only)
    with pytest.raises(RunDirectoryError, match=r"cannot write into .*Read-only file "
                                                r"system.*Nothing was written"):
        train_run(train_config(f"run_dir={tmp_path}"), tmp_path)
    with pytest.raises(RunDirectoryError, match="Nothing was written"):
        run_supervised(supervised_config(), tmp_path)


def test_evaluate_prints_its_result_even_when_it_cannot_write_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    train_run(train_config(f"run_dir={tmp_path}"), tmp_path)

    def read_only(path: Path, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(evaluate_module, "write_json", read_only)
    name, result, written = evaluate_run(EvaluateConfig(run=str(tmp_path), episodes=2,
                                                        num_envs=2))
    assert written is None and result.episodes == 2 and name == "DoorKey-16x16"
    assert "could not write the results" in capsys.readouterr().err


# 5 ---------------------------------------------------------------------------------------------
def test_a_full_disk_keeps_the_previous_checkpoint(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    train_run(train_config(f"run_dir={tmp_path}"), tmp_path)
    good = (tmp_path / "checkpoint.pt").read_bytes()

    def full_disk(payload: Any, file: Any) -> None:
        file.write(b"PK\x03\x04 partial")
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64")

    monkeypatch.setattr(checkpoint_module.torch, "save", full_disk)
    monkeypatch.setattr(checkpoint_module.shutil, "disk_usage",
                        lambda path: shutil._ntuple_diskusage(600 << 10, 600 << 10, 0))
    with pytest.raises(CheckpointWriteError, match=r"no space left on the device \(0 bytes "
                                                   r"free\). The last good checkpoint, .*, is "
                                                   "intact"):
        train_run(train_config(f"run_dir={tmp_path}", "frames=96"), tmp_path)
    assert (tmp_path / "checkpoint.pt").read_bytes() == good
    assert not list(tmp_path.glob(".checkpoint.pt.*"))  # no partial file left behind


# 7 ---------------------------------------------------------------------------------------------
def test_nan_at_the_first_update_says_no_checkpoint_exists(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_gae = ppo_update.compute_gae

    def diverging_gae(*args: Any, **kwargs: Any) -> Any:
        advantages, returns = real_gae(*args, **kwargs)
        return advantages * float("nan"), returns

    monkeypatch.setattr(ppo_update, "compute_gae", diverging_gae)
    with pytest.raises(NonFiniteLossError, match="No checkpoint was written yet"):
        train_run(train_config(f"run_dir={tmp_path}"), tmp_path)
    assert not (tmp_path / "checkpoint.pt").exists()


# 8 ---------------------------------------------------------------------------------------------
def test_resuming_with_fewer_frames_changes_nothing(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    train_run(train_config(f"run_dir={tmp_path}"), tmp_path)
    before = snapshot(tmp_path)
    train_run(train_config(f"run_dir={tmp_path}", "frames=32"), tmp_path)
    assert snapshot(tmp_path) == before  # config.yaml, progress.csv, checkpoint: untouched
    assert "has already trained 64 frames (>= frames=32): nothing to train" in \
        capsys.readouterr().out


# 9 ---------------------------------------------------------------------------------------------
def test_ctrl_c_stops_at_a_checkpoint_and_prints_the_resume_command(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    process = launch(*LONG_RUN, f"run_dir={run_dir}", cwd=tmp_path)
    wait_for(lambda: (run_dir / "progress.csv").exists()
             and len((run_dir / "progress.csv").read_text().splitlines()) > 2)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-3000:]
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    lines = [line for line in stderr.splitlines() if "Resume with:" in line]
    assert len(lines) == 1 and lines[0].endswith(
        "python -m rlmem.train " + " ".join([*LONG_RUN, f"run_dir={run_dir}"]))
    rows = (run_dir / "progress.csv").read_text().splitlines()[1:]
    assert load_checkpoint(run_dir / "checkpoint.pt").count("frames") == \
        float(rows[-1].split(",")[0])


def test_ctrl_c_in_a_supervised_run_saves_the_iteration_it_stopped_at(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "rlmem.supervised", "seq_len=4", "batch_size=2",
         "iterations=1000000", "memory.hidden_size=8", "checkpoint_every=1000000",
         "eval_every=1000000", "progress_bar=false", "figures=false", f"run_dir={tmp_path}"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (tmp_path / "progress.csv").exists()
             and len((tmp_path / "progress.csv").read_text().splitlines()) > 3)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130 and "Resume with: python -m rlmem.supervised" in stderr
    assert load_checkpoint(tmp_path / "checkpoint.pt").count("iteration") >= 3
    assert not (tmp_path / "results.json").exists()


# 10 --------------------------------------------------------------------------------------------
def test_the_short_and_full_names_of_an_env_resume_the_same_run(tmp_path: Path) -> None:
    train_run(train_config(f"run_dir={tmp_path}", "env=DoorKey-5x5"), tmp_path)
    train_run(train_config(f"run_dir={tmp_path}", "env=MiniGrid-DoorKey-5x5-v0",
                                 "frames=96"), tmp_path)
    assert load_checkpoint(tmp_path / "checkpoint.pt").count("frames") == 96


# 12 --------------------------------------------------------------------------------------------
def test_frames_rounded_up_to_whole_updates_is_said(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    train_run(train_config(f"run_dir={tmp_path}", "frames=40", "progress_bar=true"), tmp_path)
    said = capsys.readouterr()
    assert "frames=40 is not a whole number of updates" in said.out
    assert load_checkpoint(tmp_path / "checkpoint.pt").count("frames") == 64
    assert "64/64" in said.err  # the bar counts to the frames trained, not to frames=40


# 11 --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("module", "override"), [("rlmem.train", "memory=lstm_schema"),
                                                  ("rlmem.train", "agent=ppo_schema"),
                                                  ("rlmem.supervised", "task=copy_schema")])
def test_schemas_are_neither_selectable_nor_listed(module: str, override: str,
                                                   tmp_path: Path) -> None:
    result = run_cli(module, override, f"run_dir={tmp_path}", cwd=tmp_path)
    group = override.split("=")[0]
    assert result.returncode == 1 and f"{override} is not a choice of {group}" in result.stderr
    listed = result.stderr.split("the choices are ")[1].split(")")[0].split(", ")
    assert listed and not any("_schema" in choice for choice in listed)  # the real options only
    assert os.listdir(tmp_path) == []

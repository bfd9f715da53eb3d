"""``python -m rlmem.train``: a smoke run of every cell, the run directory, resuming, and
clear errors before any work on bad input."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig, OmegaConf

from rlmem.agents.ppo import update as ppo_update
from rlmem.cells import CELLS
from rlmem.runs import CheckpointMismatchError, NonFiniteLossError, load_checkpoint
from rlmem.runs import episode_stats as episodes_module
from rlmem.runs.episode_stats import STOP_EPISODES, EpisodeLog
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs, resolve
from rlmem.train import train as train_run


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open(newline="") as file:
        return list(csv.DictReader(file))


def _assert_complete_run(run_dir: Path, frames: list[int]) -> None:
    assert (run_dir / "config.yaml").exists()
    rows = _rows(run_dir)
    assert [int(float(row["frames"])) for row in rows] == frames
    for column in ("fps", "return_mean", "return_std", "length_mean", "loss/policy",
                   "loss/value", "loss/entropy", "loss/memory_aux"):
        assert column in rows[0], column
    assert list((run_dir / "tb").glob("events.out.tfevents.*"))
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")  # weights_only=True
    assert checkpoint.count("frames") == frames[-1]


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_every_cell_trains_through_the_cli_in_a_local_multirun(tmp_path: Path) -> None:
    cells = ",".join(sorted(CELLS))
    result = run_cli("rlmem.train", "-m", f"memory={cells}", *TINY_PPO,
                     "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                     f"hydra.sweep.dir={tmp_path}", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in CELLS:
        # The default folder: the cell, then TINY_PPO's settings that differ from the defaults.
        (run_dir,) = (tmp_path / "ppo" / "DoorKey-5x5").glob(f"{name},*num_envs=2/seed0")
        _assert_complete_run(run_dir, [32, 64])
        config = OmegaConf.load(run_dir / "config.yaml")
        assert config.memory.name == name and config.run_dir == str(run_dir)
    (sarnn_dir,) = (tmp_path / "ppo" / "DoorKey-5x5").glob("sarnn,*/seed0")
    sarnn = _rows(sarnn_dir)
    assert any(key.startswith("memory/") for key in sarnn[0]), "cell diagnostics are logged"


def test_resume_continues_from_the_checkpointed_frame(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = run_cli("rlmem.train", *TINY_PPO, "frames=32", f"run_dir={run_dir}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    _assert_complete_run(run_dir, [32])
    weights = load_checkpoint(run_dir / "checkpoint.pt").states["model"]
    # A killed run may have logged a row after its last checkpoint: resuming drops it.
    with (run_dir / "progress.csv").open("a") as file:
        file.write("64" + ",0" * (len(_rows(run_dir)[0]) - 1) + "\n")
    second = run_cli("rlmem.train", *TINY_PPO, "frames=96", f"run_dir={run_dir}", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    _assert_complete_run(run_dir, [32, 64, 96])
    assert load_checkpoint(run_dir / "checkpoint.pt").count("updates") == 3
    assert any(not torch.equal(weights[key], value) for key, value in
               load_checkpoint(run_dir / "checkpoint.pt").states["model"].items())

    with pytest.raises(CheckpointMismatchError,
                       match=r"memory\.hidden_size: checkpoint has 64, this run has 32"):
        train_run(_compose(*TINY_PPO, "frames=128", "memory.hidden_size=32"), run_dir)
    assert load_checkpoint(run_dir / "checkpoint.pt").count("frames") == 96


@pytest.mark.parametrize("override, message", [
    ("env=DoorKey-7x7", "unknown env 'DoorKey-7x7'; use one of DoorKey-5x5"),
    ("memory=relstn", "memory=relstn is not a choice of memory (did you mean relstm"),
    ("num_envs=many", "Value 'many' of type 'str' could not be converted to Integer"),
    ("agent.recurrence=48", "frames_per_env=16 must be a multiple of agent.recurrence=48"),
    ("agent.batch_size=64", "agent.batch_size=64 is more than the rollout's 32 frames "
                            "(num_envs=2 × agent.frames_per_env=16)"),
    ("agent=nope", "agent=nope is not a choice of agent (the choices are ppo, sb3)"),
    ("grid_encoding=onehot agent.folded_grid=true",
     "agent.folded_grid=true folds the grid's embedding into its first convolution, and "
     "grid_encoding=onehot has no embedding"),
    ("memory=gru agent.compiled_lstm=true",
     "agent.compiled_lstm=true runs an lstm memory's chunks in the compiled loop, and "
     "memory=gru is not lstm"),
])
def test_bad_input_fails_before_any_work(override: str, message: str, tmp_path: Path) -> None:
    result = run_cli("rlmem.train", *TINY_PPO, *override.split(), f"run_dir={tmp_path / 'run'}",
                     cwd=tmp_path)
    assert result.returncode == 1
    assert message in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def _compose(*overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=list(overrides))


@pytest.mark.parametrize("override, error, message", [
    ("agent.lr=fast", ConfigCompositionException, "could not be converted to Float"),
    ("memory.short_term=2.5", ConfigCompositionException, "'2.5' of type 'float' could not"),
    ("agent.bogus=1", ConfigCompositionException, "Key 'bogus' not in 'PPOConfig'"),
    ("frames=0", ValueError, "frames must be positive"),
    ("vectorization=threads", ValueError, "vectorization='threads'; use one of sync, async"),
    ("agent.gamma=2", ValueError, r"agent.gamma must be in \[0, 1\]"),
])
def test_bad_values_are_caught_when_composing_or_checking(override: str, error: type,
                                                          message: str) -> None:
    with pytest.raises(error) as caught:
        resolve(_compose("memory=relstm", override))
    assert re.search(message, f"{caught.value} {caught.value.__cause__}"), caught.value


def test_a_non_finite_loss_stops_and_keeps_the_last_good_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _compose(*TINY_PPO, "frames=96")
    calls = []
    real_gae = ppo_update.compute_gae

    def diverging_gae(*args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(1)
        advantages, returns = real_gae(*args, **kwargs)
        if len(calls) == 2:  # the second update diverges
            advantages = advantages * float("nan")
        return advantages, returns

    monkeypatch.setattr(ppo_update, "compute_gae", diverging_gae)
    with pytest.raises(NonFiniteLossError, match="last good checkpoint"):
        train_run(cfg, tmp_path)
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint.count("frames") == 32
    assert all(torch.isfinite(value).all() for value in checkpoint.states["model"].values())


def test_stop_return_ends_a_run_once_the_recent_mean_reaches_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a target every return meets, the run stops after the update in which the window's
    last episode ends (a window of 40 here, to keep the test short), far short of its frames,
    and a rerun does no more work."""
    monkeypatch.setattr(episodes_module, "STOP_EPISODES", 40)
    register_train_configs()
    overrides = ["env=MiniGrid-Empty-5x5-v0", "num_envs=8", "agent.frames_per_env=32",
                 "agent.recurrence=8", "agent.batch_size=64", "agent.epochs=1",
                 "memory.hidden_size=8", "frames=1000000", "stop_return=-1.0",
                 "progress_bar=false"]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    train_run(cfg, tmp_path)
    rows = _rows(tmp_path)
    episodes = [int(float(row["episodes"])) for row in rows]
    assert sum(episodes) >= 40 > sum(episodes[:-1])
    train_run(cfg, tmp_path)
    assert len(_rows(tmp_path)) == len(rows)


def test_stop_return_is_refused_for_sb3() -> None:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=["agent=sb3", "stop_return=0.9"])
    with pytest.raises(ValueError, match="stop_return is supported by agent=ppo only"):
        resolve(cfg)


def test_episode_log_columns_and_target() -> None:
    log = EpisodeLog([0.0] * (STOP_EPISODES - 1))
    row = log.columns([1.0, 0.5], [10, 20])
    assert row["episodes"] == 2 and row["return_mean"] == 0.75 and row["length_mean"] == 15
    assert row["return_recent"] == pytest.approx(1.5 / 100)  # the last 100 episodes
    assert log.reached(1.5 / STOP_EPISODES - 1e-9) and not log.reached(1.5 / STOP_EPISODES + 1e-9)
    assert not log.reached(None) and len(log.recent) == STOP_EPISODES
    empty = EpisodeLog().columns([], [])
    assert empty["episodes"] == 0 and all(
        empty[key] != empty[key] for key in ("return_mean", "return_recent", "length_mean"))

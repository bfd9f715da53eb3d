"""``python -m rlmem.train agent=sb3``: RecurrentPPO runs with the run directory of agent=ppo."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from full_attention_check import LONG_ENV, evaluate_without_overflow
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import DictConfig
from stable_baselines3.common.evaluation import evaluate_policy

from rlmem.agents.sb3 import MemoryPolicy
from rlmem.agents.sb3.recorder import SB3_METRICS
from rlmem.agents.sb3.train import load_model, make_envs
from rlmem.cells import CELLS
from rlmem.cells.memlstm import MemoryOverflowWarning
from rlmem.evaluate import evaluate_run
from rlmem.runs import CheckpointMismatchError, load_checkpoint
from rlmem.runs.checkpoint import FORMAT
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.train import train

TINY = ("env=DoorKey-5x5", "num_envs=2", "agent.frames_per_env=16", "agent.batch_size=32",
        "agent.epochs=1", "memory.hidden_size=16", "progress_bar=false")


def config(*overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="train", overrides=["agent=sb3", *TINY, *overrides])


def rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open(newline="") as file:
        return list(csv.DictReader(file))


CELLS_BY_DEFAULT = ("lstm", "relstm", "memlstm", "gtrxl")
"""Cells whose CLI run is in the default suite: the class swap, a screened cell, the cell with
an evaluation capacity, the windowed transformer. The others run with ``-m slow``; every cell
already trains in RecurrentPPO by default (``test_sb3_contrib_lstm.py``, ``test_sb3.py``)."""


@pytest.mark.parametrize("cell", [cell if cell in CELLS_BY_DEFAULT
                                  else pytest.param(cell, marks=pytest.mark.slow)
                                  for cell in sorted(CELLS)])
def test_run_writes_the_run_directory_of_agent_ppo(cell: str, tmp_path: Path) -> None:
    extra = ("memory.capacity=16",) if cell == "memlstm" else ()
    train(config(f"memory={cell}", "frames=64", f"run_dir={tmp_path}", *extra), tmp_path)
    assert (tmp_path / "config.yaml").read_text().count("name: sb3") == 1
    table = rows(tmp_path)
    assert [int(float(row["frames"])) for row in table] == [32, 64]
    for column in ("updates", "fps", "episodes", "return_mean", "length_mean",
                   *(name for name, _ in SB3_METRICS.values()), "loss/memory_aux"):
        assert column in table[0], column
    assert float(table[-1]["loss/entropy"]) > 0  # an entropy, not SB3's negated one
    assert list((tmp_path / "tb").iterdir())
    assert torch.load(tmp_path / "checkpoint.pt", weights_only=True)["format"] == FORMAT
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint.count("frames") == 64 and checkpoint.count("updates") == 2
    model = load_model(tmp_path)
    assert isinstance(model.policy, MemoryPolicy) and model.policy.memory == cell
    for key, value in model.policy.state_dict().items():
        assert torch.equal(value, checkpoint.states["policy"][key]), key
    mean, _ = evaluate_policy(model, make_envs(checkpoint.config, 2, seed=3),
                              n_eval_episodes=2, warn=False)
    assert np.isfinite(mean)


def test_resume_continues_where_the_run_stopped(tmp_path: Path) -> None:
    train(config("memory=relstm", "frames=64", f"run_dir={tmp_path}"), tmp_path)
    first = load_checkpoint(tmp_path / "checkpoint.pt")
    train(config("memory=relstm", "frames=128", f"run_dir={tmp_path}"), tmp_path)
    table = rows(tmp_path)
    assert [int(float(row["frames"])) for row in table] == [32, 64, 96, 128]
    assert [int(float(row["updates"])) for row in table] == [1, 2, 3, 4]
    second = load_checkpoint(tmp_path / "checkpoint.pt")
    assert second.count("frames") == 128
    changed = [not torch.equal(first.states["policy"][key], value)
               for key, value in second.states["policy"].items() if value.is_floating_point()]
    assert any(changed)
    # Done already: nothing to add, nothing rewritten.
    train(config("memory=relstm", "frames=128", f"run_dir={tmp_path}"), tmp_path)
    assert len(rows(tmp_path)) == 4
    with pytest.raises(CheckpointMismatchError, match="memory"):
        train(config("memory=gru", "frames=160", f"run_dir={tmp_path}"), tmp_path)


def test_resume_false_starts_afresh(tmp_path: Path) -> None:
    train(config("memory=gru", "frames=64", f"run_dir={tmp_path}"), tmp_path)
    train(config("memory=gru", "frames=32", f"run_dir={tmp_path}", "resume=false"), tmp_path)
    assert [int(float(row["frames"])) for row in rows(tmp_path)] == [32]


@pytest.mark.parametrize(("override", "message"), [
    (("agent.shared_lstm=true",), "enable_critic_lstm"),
    (("agent.lr=-1",), "agent.lr"),
    (("agent.batch_size=1",), "agent.batch_size"),
    (("agent.gamma=1.5",), "agent.gamma"),
])
def test_bad_values_fail_before_any_work(override: tuple[str, ...], message: str,
                                         tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=message):
        train(config(*override, f"run_dir={tmp_path}"), tmp_path)
    assert not (tmp_path / "config.yaml").exists()


def test_misspelt_key_fails_at_composition(tmp_path: Path) -> None:
    with pytest.raises(ConfigCompositionException):
        config("agent.lrr=0.1", f"run_dir={tmp_path}")


def test_shared_and_feedforward_critics(tmp_path: Path) -> None:
    train(config("memory=gru", "frames=32", f"run_dir={tmp_path}/shared",
                 "agent.shared_lstm=true", "agent.enable_critic_lstm=false"),
          tmp_path / "shared")
    train(config("memory=gru", "frames=32", f"run_dir={tmp_path}/ff",
                 "agent.enable_critic_lstm=false"), tmp_path / "ff")
    assert load_model(tmp_path / "shared").policy.shared_lstm
    assert load_model(tmp_path / "ff").policy.critic is not None


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_cli(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "rlmem.train", "agent=sb3", "memory=relstm", "frames=32",
               *TINY, f"run_dir={tmp_path}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert [int(float(row["frames"])) for row in rows(tmp_path)] == [32]
    bad = subprocess.run([*command, "agent.shared_lstm=true"], capture_output=True, text=True,
                         timeout=300, check=False)
    assert bad.returncode == 1 and "enable_critic_lstm" in bad.stderr


@pytest.mark.parametrize("policy", ["memory", "sb3_lstm"])
def test_rlmem_evaluate_plays_sb3_runs(policy: str, tmp_path: Path) -> None:
    """``python -m rlmem.evaluate`` evaluates agent=sb3 runs (rlmem's cell or sb3-contrib's own
    LSTM) on the transfer target, with the same quotas and JSON as agent=ppo runs."""
    train(config("frames=32", f"agent.policy={policy}", "grid_encoding=onehot"), tmp_path)
    name, result, written = evaluate_run(EvaluateConfig(run=str(tmp_path), env="transfer",
                                                        episodes=2, num_envs=2))
    assert name == "DoorKey-16x16" and result.episodes == 2 and written is not None
    report = json.loads(written.read_text())
    assert report["agent"] == "sb3" and report["frames"] == 32


def test_rlmem_evaluate_gives_sb3_memlstm_full_attention(tmp_path: Path) -> None:
    """As for agent=ppo runs: MemLSTM is evaluated with its capacity raised to the env's step
    limit (no sliding window), and an eval_memory that changes the weights is refused."""
    with warnings.catch_warnings():  # its training episodes outgrow capacity=8
        warnings.simplefilter("ignore", MemoryOverflowWarning)
        train(config("frames=32", "memory=memlstm", "memory.capacity=8"), tmp_path)
    _, written = evaluate_without_overflow(tmp_path, episodes=2)
    assert json.loads(written.read_text())["eval_memory"] == {"capacity": 100}
    with pytest.raises(ValueError, match=r"eval_memory=\{'capacity': 100, 'hidden_size': 9\} "
                                         "changes the cell's weights"):
        evaluate_run(EvaluateConfig(run=str(tmp_path), env=LONG_ENV, episodes=1,
                                    eval_memory={"hidden_size": 9}))


def test_sb3_lstm_policy_needs_memory_lstm(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"sb3_lstm is sb3-contrib.s own nn.LSTM: it needs "
                                         "memory=lstm, got memory=gru"):
        train(config("frames=32", "agent.policy=sb3_lstm", "memory=gru"), tmp_path)


def test_sb3_lstm_policy_takes_the_memory_size_and_stack(tmp_path: Path) -> None:
    train(config("frames=32", "agent.policy=sb3_lstm", "memory.num_layers=2",
                 "memory.dropout=0.1"), tmp_path)
    lstm = load_model(tmp_path).policy.lstm_actor
    assert isinstance(lstm, torch.nn.LSTM)
    assert (lstm.hidden_size, lstm.num_layers, lstm.dropout) == (16, 2, 0.1)

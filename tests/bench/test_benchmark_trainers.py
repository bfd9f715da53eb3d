"""The PPO trainers the benchmark scripts build without a run config (benchmarks/scaling.py,
cuda_check.py, throughput.py, profile_update.py): each takes MiniGrid's preset, and one whole
update runs. Not a timing: that the scripts still build what they time."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
import torch
from benchmark_scripts import load_benchmark
from locations import REPO

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.presets import PRESET_KEYS, Preset, agent_values
from rlmem.agents.ppo.run_pieces import KernelOptions


@pytest.fixture
def scaling() -> Iterator[ModuleType]:
    yield from load_benchmark("scaling")


@pytest.fixture
def cuda_check() -> Iterator[ModuleType]:
    yield from load_benchmark("cuda_check")


@pytest.fixture
def throughput() -> Iterator[ModuleType]:
    yield from load_benchmark("throughput")


def test_the_agent_values_of_a_preset_build_a_config() -> None:
    config = PPOConfig(**agent_values(Preset.minigrid))
    assert {key: getattr(config, key) for key in PRESET_KEYS} == agent_values(Preset.minigrid)
    assert config.recurrence == 16 and config.shared_memory is True


def test_scaling_times_the_minigrid_preset(scaling: ModuleType) -> None:
    config = scaling.minigrid_config()
    assert {key: getattr(config, key) for key in PRESET_KEYS} == agent_values(Preset.minigrid)
    update, close = scaling.ppo("lstm", 2, 0)
    try:
        assert update() == 2 * config.frames_per_env
    finally:
        close()


def test_cuda_check_builds_a_trainer_on_the_cpu(cuda_check: ModuleType) -> None:
    trainer = cuda_check.ppo_trainer("lstm", 2, torch.device("cpu"))
    try:
        assert trainer.step() == 2 * agent_values(Preset.minigrid)["frames_per_env"]
    finally:
        trainer.close()


def test_profile_update_times_rollouts_and_updates() -> None:
    """``--rows 0`` prints the best rollout and update of ``--rounds`` and no profile."""
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "profile_update.py"), "--rounds", "2",
         "--rows", "0"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"}, check=True)
    assert done.stdout.startswith("one rollout ") and "(best of 2)" in done.stdout
    assert "ncalls" not in done.stdout


def test_throughput_gives_ours_the_runs_decisions_and_sb3_the_same_hyperparameters(
        throughput: ModuleType) -> None:
    fast = throughput.decided_config("DoorKey-5x5", Preset.fast)
    assert {key: getattr(fast, key) for key in PRESET_KEYS} == agent_values(Preset.fast)
    assert fast.fused_adam is True  # on outside the exact reference (FUSED_ADAM_MORE_SEEDS.md)
    assert fast.compiled_lstm is True  # as a run of lstm decides it
    assert set(throughput.KERNEL_KEYS) == set(KernelOptions.__annotations__)
    assert throughput.decided_config("DoorKey-5x5", Preset.fast, "relstm").compiled_lstm is False
    assert throughput.matched(fast) == {
        "n_steps": 16, "n_epochs": 4, "batch_size": 256, "learning_rate": fast.lr,
        "ent_coef": 0.01, "max_grad_norm": fast.max_grad_norm,
        "policy_kwargs": {"lstm_hidden_size": 64}}
    minigrid = throughput.decided_config("DoorKey-5x5", Preset.minigrid)
    trainer = throughput.ours("DoorKey-5x5", 2, "lstm", minigrid, "tensor")
    try:
        assert trainer.step() == 2 * 128
    finally:
        trainer.close()

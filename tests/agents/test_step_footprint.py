"""A large run whose rollout fits but whose rollout and one step's tensors together do not is
refused before it starts, in one paragraph (issue 59, "bad input stays one paragraph"): the
step is measured at two small numbers of envs and extrapolated op by op."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from rlmem.agents.ppo import rollout_footprint, step_footprint
from rlmem.agents.ppo.step_footprint import OpBytes, step_bound, step_ops
from rlmem.agents.run_config import RunConfig
from rlmem.envs import make_env
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs, resolve

LARGE = ["env=DoorKey-5x5", "memory=lstm", "agent.preset=fast", "num_envs=20000",
         "progress_bar=false", "device=cpu"]
"""A fast-preset run of 20,000 envs: a rollout of about 53 MiB."""


def config_of(tmp_path: Path, *overrides: str) -> RunConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[*overrides, f"run_dir={tmp_path / 'run'}"])
    return resolve(cfg)


def test_an_op_holds_its_arguments_and_outputs_each_storage_once() -> None:
    a, b = torch.zeros(1000), torch.zeros(500)
    first, second = a[:500], a[500:]  # two views of one storage
    with OpBytes() as measured:
        first + second  # reads a's 4000 bytes once, writes 2000
        torch.cat([b, b])
    assert measured.ops == [("aten.add.Tensor", 4000 + 2000),
                            ("aten.cat.default", 2000 + 4000)]


def test_the_step_bound_passes_through_its_probes_and_leaves_the_random_state(
        tmp_path: Path) -> None:
    config = config_of(tmp_path, *LARGE)
    state = torch.get_rng_state()
    for envs in step_footprint.PROBE_ENVS:
        measured = max(held for _, held in step_ops(config, torch.device("cpu"), envs))
        probe = config_of(tmp_path, *LARGE[:-3], f"num_envs={envs}", *LARGE[-2:])
        bound = step_bound(probe, torch.device("cpu"))
        assert bound is not None and bound.bytes == measured
    assert torch.equal(torch.get_rng_state(), state)


def test_a_run_whose_rollout_and_step_exceed_the_memory_is_one_paragraph(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = config_of(tmp_path, *LARGE)
    rollout = rollout_footprint.rollout_bytes(make_env("DoorKey-5x5").observation_space,
                                              20000, 16)
    bound = step_bound(config, torch.device("cpu"))
    assert bound is not None and bound.bytes > 20000 * 100  # the grid's rows: KiB an env
    memory = rollout + bound.bytes // 2  # the rollout fits, rollout and step do not
    for module in (rollout_footprint, step_footprint):
        monkeypatch.setattr(module, "device_memory", lambda device: memory)
    with pytest.raises(ValueError, match=(
            r"num_envs=20000 × agent\.frames_per_env=16: the rollout holds at least [\d.]+ "
            r"MiB, and one step of the envs and the model at least [\d.]+ MiB more beside it "
            r"\(aten\.\w+\.\w+, measured at 64 and 128 envs\), together more than this "
            r"machine's memory, [\d.]+ MiB\. Nothing was started; choose fewer num_envs\.")):
        config_of(tmp_path, *LARGE)
    assert not (tmp_path / "run").exists()
    twice = 2 * (rollout + bound.bytes)
    for module in (rollout_footprint, step_footprint):
        monkeypatch.setattr(module, "device_memory", lambda device: twice)
    config_of(tmp_path, *LARGE)  # fits

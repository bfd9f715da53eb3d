"""A rollout that cannot fit its device is refused before the run starts (issue 59, "bad input
stays one paragraph"): ``num_envs`` far beyond memory on the CPU, and on a GPU its free memory,
with the lower bound named."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from gymnasium import spaces

from rlmem.agents.ppo.rollout_footprint import (
    SCALARS_PER_FRAME,
    check_rollout_fits,
    observation_bytes,
)


def test_observation_bytes_count_each_field_as_the_rollout_stores_it() -> None:
    space = spaces.Dict({"image": spaces.Box(0, 255, (7, 7, 3), dtype=np.uint8),
                         "direction": spaces.Discrete(4),
                         "pair": spaces.Tuple((spaces.MultiDiscrete([3, 3]),
                                               spaces.Box(-1, 1, (2,), dtype=np.float32))),
                         "mission": spaces.Text(10)})
    assert observation_bytes(space) == 147 + 8 + 16 + 8  # text: not counted (lower bound)


def test_num_envs_beyond_the_machines_memory_is_one_paragraph(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.train", *TINY_PPO, "num_envs=1000000000", f"run_dir={run_dir}",
                     cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not run_dir.exists()
    assert re.search(r"num_envs=1000000000 × agent\.frames_per_env=\d+: the rollout alone "
                     r"holds at least [\d.]+ [KMGTP]iB .*more than this machine's memory",
                     result.stderr), result.stderr[-2000:]
    assert "Nothing was started; choose fewer num_envs" in result.stderr


def test_a_gpu_rollout_is_measured_against_the_gpus_free_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    free = 1 << 30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 4 * free))
    space = spaces.Box(0, 255, (7, 7, 3), dtype=np.uint8)
    per_frame = 147 + 4 * SCALARS_PER_FRAME
    fits = free // (per_frame * 17)
    check_rollout_fits(space, fits, 16, torch.device("cuda", 0))
    with pytest.raises(ValueError, match=r"more than the free memory of cuda:0, 1 GiB"):
        check_rollout_fits(space, fits + 1, 16, torch.device("cuda", 0))

"""Running rlmem's CLIs as ``python -m`` does, as a user would: in a child of the zygote
(:mod:`cli_zygote`, which has imported torch and the rest once), or in a fresh process with
``RLMEM_TESTS_FRESH_PROCESSES=1``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from cli_zygote import FRESH, Zygote

from rlmem.runs import load_checkpoint
from rlmem.runs.progress import read_progress

TINY_PPO = ["num_envs=2", "frames=64", "agent.frames_per_env=16", "agent.recurrence=8",
            "agent.batch_size=16", "agent.epochs=1", "progress_bar=false", "device=cpu"]
"""Overrides for a PPO run of two updates of 32 frames."""


ZYGOTE = Zygote()
"""This test process's zygote, started by its first CLI."""


def run_module(module: str, args: list[str], cwd: Path, env: dict[str, str],
               timeout: float = 300, umask: int | None = None
               ) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` in ``cwd`` with exactly ``env`` (and ``umask``), output
    captured, through the zygote; in a fresh process where it cannot serve ``env``
    (:meth:`cli_zygote.Zygote.serves`) or :data:`cli_zygote.FRESH` asks for one."""
    if os.environ.get(FRESH) == "1" or not ZYGOTE.serves(env):
        return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout, check=False,
                              preexec_fn=None if umask is None else lambda: os.umask(umask))
    return ZYGOTE.run(module, list(args), cwd, env, timeout, umask)


def run_cli(module: str, *args: str, cwd: Path,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m module args...`` in ``cwd``, single-threaded, output captured."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    return run_module(module, list(args), cwd, env, timeout)


def wait_for(condition: Callable[[], bool], timeout: float = 120) -> None:
    """Poll ``condition`` every 0.2 s until it holds; fail the test after ``timeout`` seconds.

    For a CLI started with ``subprocess.Popen`` whose progress a test watches on disk."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def assert_stopped_at_its_checkpoint(run_dir: Path) -> None:
    """An interrupted PPO run's checkpoint holds the last update its ``progress.csv`` logged:
    it stopped at a checkpoint, not part-way through an update."""
    saved = load_checkpoint(run_dir / "checkpoint.pt").count("frames")
    logged = read_progress(run_dir / "progress.csv")[-1].number("frames")
    assert saved == logged, f"{run_dir}: checkpoint at {saved} frames, progress.csv at {logged}"

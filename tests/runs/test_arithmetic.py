"""``flush_denormal``: a run computes with subnormal floats kept (IEEE, the default) or flushed
to zero, records which, resumes and is evaluated only with it, and refuses to run where the
setting cannot hold on every thread."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import TINY_PPO
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

import rlmem.evaluate
from rlmem.evaluate import evaluate_run
from rlmem.runs import CheckpointMismatchError, load_checkpoint
from rlmem.runs.arithmetic import SMALLEST_NORMAL, SubnormalFlushError, subnormal_floats
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.supervised import register_supervised_configs
from rlmem.schema.train import register_train_configs
from rlmem.supervised import run as run_supervised
from rlmem.train import train as train_run

SUBNORMAL = SMALLEST_NORMAL / 4


def supervised_config(run_dir: Path | None, *overrides: str) -> DictConfig:
    register_supervised_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("supervised", overrides=[
            "seq_len=4", "batch_size=2", "iterations=2", "memory.hidden_size=8", "eval_every=1",
            "eval_batch_size=2", "progress_bar=false", "figures=false", "device=cpu",
            *([f"run_dir={run_dir}"] if run_dir is not None else []), *overrides])


def product_is_zero() -> bool:
    """Whether a subnormal times 1.5 (still subnormal in IEEE arithmetic) comes out as zero."""
    return bool((torch.full((1,), SUBNORMAL) * 1.5 == 0).item())


@pytest.fixture
def one_thread() -> Iterator[None]:
    """This process computes on its calling thread alone (as a run with ``torch_threads=1``
    does), whatever its pool's threads were made under by earlier tests."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.usefixtures("one_thread")
def test_subnormals_are_flushed_inside_the_block_only_and_kept_by_default() -> None:
    assert not product_is_zero()
    with subnormal_floats(True):
        assert product_is_zero()
        # Read as zero too: a subnormal input contributes nothing to a normal result.
        assert (torch.tensor([SUBNORMAL]) * 2.0**30).item() == 0.0
    assert not product_is_zero()
    with subnormal_floats(False):
        assert not product_is_zero()
        assert (torch.tensor([SUBNORMAL]) * 2.0**30).item() == pytest.approx(SUBNORMAL * 2**30)


PROBE = """
import torch
from rlmem.runs.arithmetic import subnormal_floats, SubnormalFlushError
torch.set_num_threads(2)
if {warm}:
    torch.ones(1 << 22).mul_(2)  # PyTorch's pool is made now, with subnormals kept
try:
    with subnormal_floats(True):
        print("flushed", bool((torch.full((1,), 3e-39).expand(1 << 22) * 1.5 == 0).all()))
except SubnormalFlushError as error:
    print("refused:", error)
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores for a pool of threads")
@pytest.mark.parametrize("warm", [False, True])
def test_with_two_threads_every_thread_flushes_or_the_run_is_refused(warm: bool) -> None:
    """PyTorch sets the flag on the calling thread; its pool's threads take it when they are
    made. In a fresh process the pool is made under the flag and every element is flushed; a
    pool made before it would flush part of a computation, which is refused, not run."""
    result = subprocess.run([sys.executable, "-c", PROBE.format(warm=warm)],
                            capture_output=True, text=True, check=True)
    if warm:
        assert result.stdout.startswith("refused: flush_denormal=true: some of PyTorch's 2 "
                                        "threads compute with subnormal floats kept")
        assert "torch_threads=1" in result.stdout
    else:
        assert result.stdout.strip() == "flushed True"


def test_a_supervised_run_records_its_arithmetic_and_resumes_only_with_it(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_supervised(supervised_config(run_dir, "flush_denormal=true"), run_dir)
    assert load_checkpoint(run_dir / "checkpoint.pt").config["flush_denormal"] is True
    assert OmegaConf.load(run_dir / "config.yaml").flush_denormal is True
    assert not product_is_zero()  # the run's end leaves the arithmetic as it found it
    with pytest.raises(CheckpointMismatchError, match="flush_denormal: checkpoint has True"):
        run_supervised(supervised_config(run_dir, "iterations=3"), run_dir)
    result = run_supervised(supervised_config(run_dir, "iterations=3", "flush_denormal=true"),
                            run_dir)
    assert result.iteration == 3


def test_the_default_run_directory_names_a_flushed_run_apart() -> None:
    kept, flushed = (supervised_config(None, *extra).run_dir
                     for extra in ([], ["flush_denormal=true"]))
    assert "flush_denormal" not in kept and "flush_denormal-true" in flushed
    assert kept != flushed


def test_an_rl_run_trains_resumes_and_evaluates_with_its_arithmetic(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = tmp_path / "run"
    seen: list[bool] = []
    evaluate_policy = rlmem.evaluate.evaluate_policy

    def watched(*args: Any, **kwargs: Any) -> Any:
        seen.append(product_is_zero())
        return evaluate_policy(*args, **kwargs)

    monkeypatch.setattr(rlmem.evaluate, "evaluate_policy", watched)

    def config(*overrides: str) -> DictConfig:
        register_train_configs()
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            return compose("train", overrides=[*TINY_PPO, "memory.hidden_size=8",
                                               f"run_dir={run_dir}", *overrides])

    train_run(config("frames=32", "flush_denormal=true"), run_dir)
    assert load_checkpoint(run_dir / "checkpoint.pt").config["flush_denormal"] is True
    with pytest.raises(CheckpointMismatchError, match="flush_denormal"):
        train_run(config("frames=64"), run_dir)
    _, result, written = evaluate_run(EvaluateConfig(run=str(run_dir), episodes=1, num_envs=1,
                                                     device="cpu"))
    assert result.episodes == 1 and written is not None
    assert json.loads(written.read_text())["episodes"] == 1
    assert seen == [True]  # the evaluation computed as the run trained
    assert not product_is_zero()


def test_a_cpu_without_the_switch_refuses_a_flushed_run_before_it_trains(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # What torch.set_flush_denormal answers on a CPU without a flush-to-zero mode.
    monkeypatch.setattr(torch, "set_flush_denormal", lambda on: False)
    run_dir = tmp_path / "run"
    with pytest.raises(SubnormalFlushError, match="this CPU has no flush-to-zero mode"):
        run_supervised(supervised_config(run_dir, "flush_denormal=true"), run_dir)
    assert not (run_dir / "checkpoint.pt").exists()
    assert not (run_dir / "config.yaml").exists()
    assert isinstance(SubnormalFlushError("x"), ValueError)  # reported as a user's error
    monkeypatch.undo()
    assert run_supervised(supervised_config(run_dir), run_dir).iteration == 2

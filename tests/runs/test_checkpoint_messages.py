"""A checkpoint that is not what its config says is refused in one paragraph, never with a
traceback (issue 28, "Messages"): weights that do not fit their own config, a key rlmem never
writes, another trainer's states, pickled Python objects, a config hint that cannot be true, a
missing ``warm_start``. Each checkpoint here is crafted with ``torch.save`` of a plain dict, as
anyone could make one."""

from __future__ import annotations

import collections
import pickletools
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from rlmem.runs import CheckpointMismatchError, UnreadableCheckpointError, load_checkpoint
from rlmem.runs.checkpoint import check_compatible
from rlmem.runs.restore import IncompatibleStateError
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.supervised import run as run_supervised
from rlmem.train import train as train_run

HIDDEN = ["memory.hidden_size=8"]


def train_config(run_dir: Path, *overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*TINY_PPO, *HIDDEN, "frames=32",
                                           f"run_dir={run_dir}", *overrides])


def supervised_config(run_dir: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("supervised", overrides=[
            "seq_len=4", "batch_size=2", "iterations=2", "memory.hidden_size=8",
            "eval_every=1", "eval_batch_size=2", "progress_bar=false", "figures=false",
            f"run_dir={run_dir}", *overrides])


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny PPO run, copied by each test that alters it."""
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    train_run(train_config(run_dir), run_dir)
    return run_dir


def altered(trained: Path, tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of ``trained`` whose checkpoint is the plain dict on disk, edited by ``edit``."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for item in trained.iterdir():
        if item.is_file():
            (run_dir / item.name).write_bytes(item.read_bytes())
    payload = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    edit(payload)
    torch.save(payload, run_dir / "checkpoint.pt")
    return run_dir


def evaluate_cli(run_dir: Path, tmp_path: Path) -> str:
    """``rlmem.evaluate run=<run_dir>``, which must fail with one message; its stderr."""
    result = run_cli("rlmem.evaluate", f"run={run_dir}", "episodes=1", "num_envs=1",
                     cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.startswith("rlmem.evaluate: error: ") or \
        "\nrlmem.evaluate: error: " in result.stderr, result.stderr[-3000:]
    return result.stderr


def resume_cli(run_dir: Path, tmp_path: Path, *overrides: str,
               agent: tuple[str, ...] = tuple(TINY_PPO)) -> str:
    """``rlmem.train`` resuming ``run_dir``, which must fail with one message; its stderr."""
    result = run_cli("rlmem.train", *agent, *HIDDEN, "frames=96", f"run_dir={run_dir}",
                     *overrides, cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    return result.stderr


# weights that do not fit their own config ------------------------------------------------------

def _bigger_memory(payload: dict[str, Any]) -> None:
    payload["config"]["memory"]["hidden_size"] = 16  # the weights stay those of 8


def test_weights_that_do_not_fit_their_config_are_named_not_blamed_on_eval_memory(
        trained: Path, tmp_path: Path) -> None:
    run_dir = altered(trained, tmp_path, _bigger_memory)
    stderr = evaluate_cli(run_dir, tmp_path)
    assert "eval_memory" not in stderr
    assert f"{run_dir / 'checkpoint.pt'}: its 'model' state does not fit" in stderr
    assert "memory.hidden_size=16" in stderr and "where the model has" in stderr
    assert "The file is as it was" in stderr


def test_resuming_weights_that_do_not_fit_their_config_is_one_message(
        trained: Path, tmp_path: Path) -> None:
    run_dir = altered(trained, tmp_path, _bigger_memory)
    before = (run_dir / "checkpoint.pt").read_bytes()
    stderr = resume_cli(run_dir, tmp_path, "memory.hidden_size=16")
    assert "'model' state does not fit the ActorCritic its own config builds" in stderr
    assert "size mismatch" not in stderr and "resume=false" in stderr
    assert (run_dir / "checkpoint.pt").read_bytes() == before


def test_a_supervised_checkpoint_whose_weights_do_not_fit_is_one_message(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "supervised"
    run_supervised(supervised_config(run_dir), run_dir)
    payload = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    payload["states"]["model"]["readout.weight"] = torch.zeros(3, 3)
    torch.save(payload, run_dir / "checkpoint.pt")
    with pytest.raises(IncompatibleStateError,
                       match=r"'model' state does not fit the SequenceModel .*readout\.weight "
                             r"is \[3, 3\] where the model has"):
        run_supervised(supervised_config(run_dir, "iterations=3"), run_dir)


def test_a_ppo_run_whose_generator_state_is_a_gpus_says_so_on_resume(
        trained: Path, tmp_path: Path) -> None:
    """Every trainer restores its generators through one check (``restore_rng``): a CUDA
    generator's 16-byte state under a CPU run is named as another device's, not as a corrupt
    file, and the checkpoint is left as it was."""
    def cuda_state(payload: dict[str, Any]) -> None:
        payload["rng"]["torch"] = torch.zeros(16, dtype=torch.uint8)

    run_dir = altered(trained, tmp_path, cuda_state)
    before = (run_dir / "checkpoint.pt").read_bytes()
    stderr = resume_cli(run_dir, tmp_path)
    assert "holds a 'torch' generator state of 16 bytes where this run's cpu generator keeps " \
        "5,056: it drew its random numbers on another kind of device than this run's cpu" \
        in " ".join(stderr.split())
    assert "The file is as it was" in stderr and "resume=false" in stderr
    assert (run_dir / "checkpoint.pt").read_bytes() == before


def test_sb3_states_under_a_ppo_config_say_what_the_file_holds(trained: Path,
                                                               tmp_path: Path) -> None:
    def as_sb3(payload: dict[str, Any]) -> None:
        payload["states"]["policy"] = payload["states"].pop("model")

    run_dir = altered(trained, tmp_path, as_sb3)
    stderr = evaluate_cli(run_dir, tmp_path)
    assert "error: model\n" not in stderr
    assert "has no 'model' state, which a run of its config (agent=ppo memory=lstm" in stderr
    assert "its states are: 'optimizer', 'policy'" in stderr or \
        "its states are: 'policy', 'optimizer'" in stderr
    with pytest.raises(IncompatibleStateError, match="has no 'model' state"):
        train_run(train_config(run_dir, "frames=96"), run_dir)


def test_a_top_level_key_rlmem_never_writes_is_named(trained: Path, tmp_path: Path) -> None:
    run_dir = altered(trained, tmp_path, lambda payload: payload.update(surprise=1))
    stderr = evaluate_cli(run_dir, tmp_path)
    assert "TypeError" not in stderr
    assert "has keys rlmem never writes (surprise)" in stderr and "resume=false" in stderr


# pickled objects --------------------------------------------------------------------------------

class Ordered(collections.OrderedDict[str, Any]):
    """A state dict's class, subclassed: pickled by name, as a crafted checkpoint would."""


class Payload:
    """Any class instance."""

    def __init__(self) -> None:
        self.answer = 42


@pytest.mark.parametrize("crafted", [Ordered, Payload], ids=["OrderedDict subclass", "object"])
def test_pickled_objects_are_called_possibly_malicious_not_corrupt(
        trained: Path, tmp_path: Path, crafted: type) -> None:
    run_dir = altered(trained, tmp_path, lambda payload: payload["extras"].update(x=crafted()))
    stderr = evaluate_cli(run_dir, tmp_path)
    assert f"holds pickled Python objects ({__name__}.{crafted.__name__})" in stderr
    assert "may be malicious" in stderr
    assert "truncated" not in stderr and "weights_only" not in stderr
    assert "trust the source" not in stderr


def _half(stream: bytes) -> int:
    return len(stream) // 2


def _after_a_one_byte_number(stream: bytes) -> int:
    """Just after the first BININT1 opcode, before its byte: the unpickler reads nothing."""
    return next(position + 1 for opcode, _, position in pickletools.genops(stream)
                if opcode.name == "BININT1" and position is not None)


@pytest.mark.parametrize("cut", [_half, _after_a_one_byte_number])
def test_a_truncated_pickle_is_corrupt_and_no_unsafe_load_is_suggested(
        trained: Path, tmp_path: Path, cut: Callable[[bytes], int]) -> None:
    run_dir = altered(trained, tmp_path, lambda payload: None)
    path = run_dir / "checkpoint.pt"
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data[:cut(data)] if name.endswith("data.pkl") else data)
    with pytest.raises(UnreadableCheckpointError, match="truncated or corrupt") as caught:
        load_checkpoint(path)
    assert "weights_only" not in str(caught.value) and "malicious" not in str(caught.value)


# the resume hint ---------------------------------------------------------------------------------

def test_another_cell_is_not_called_an_older_rlmem(tmp_path: Path) -> None:
    """A supervised GRU run resumed as an LSTM minutes later: the cells differ, not the
    rlmem version, and ``grid_encoding`` is no key of a supervised run."""
    run_dir = tmp_path / "gru"
    run_supervised(supervised_config(run_dir, "memory=gru"), run_dir)
    with pytest.raises(CheckpointMismatchError) as caught:
        run_supervised(supervised_config(run_dir, "memory=lstm", "iterations=3"), run_dir)
    message = str(caught.value)
    assert "memory.name: checkpoint has 'gru', this run has 'lstm'" in message
    assert "resume it with memory=gru" in message
    for wrong in ("grid_encoding", "written before", "forget_bias", "older rlmem"):
        assert wrong not in message, wrong


def test_another_agent_is_not_called_an_older_rlmem(trained: Path, tmp_path: Path) -> None:
    run_dir = altered(trained, tmp_path, lambda payload: None)
    stderr = resume_cli(run_dir, tmp_path, agent=(
        "agent=sb3", "num_envs=2", "agent.frames_per_env=16", "agent.batch_size=16",
        "agent.epochs=1", "progress_bar=false", "device=cpu"))
    assert "agent.name: checkpoint has 'ppo', this run has 'sb3'" in stderr
    assert "resume it with agent=ppo" in stderr
    for wrong in ("grid_encoding=raw", "written before", "older rlmem", "does not record"):
        assert wrong not in stderr, wrong


def test_a_key_the_checkpoint_lacks_is_not_known_never_assumed() -> None:
    """A checkpoint of the current format records every key; one without a key (altered, or
    of an older rlmem whose migration was skipped) is not given a value it might not have had:
    the advice is to evaluate it or start afresh. Keys it records are advised as overrides."""
    saved = {"memory": {"name": "lstm", "hidden_size": 8}}
    current = {"memory": {"name": "lstm", "hidden_size": 8, "forget_bias": 1.0,
                          "chrono_t_max": None}}
    with pytest.raises(CheckpointMismatchError) as caught:
        check_compatible(saved, current, ["memory"])
    message = str(caught.value)
    assert "memory.forget_bias: the checkpoint does not record it, this run has 1.0" in message
    assert "does not record memory.chrono_t_max, memory.forget_bias" in message
    assert "evaluate it as it is, or start afresh with resume=false" in message
    assert "written before" not in message and "Resume it with" not in message
    saved["memory"].update(forget_bias=0.0, chrono_t_max=None, hidden_size=16)
    with pytest.raises(CheckpointMismatchError) as caught:
        check_compatible(saved, current, ["memory"])
    assert "Resume it with memory.forget_bias=0.0 memory.hidden_size=16" in str(caught.value)


# warm_start ---------------------------------------------------------------------------------------

def test_a_missing_warm_start_is_one_message_before_any_work(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.supervised", "seq_len=4", "batch_size=2", "iterations=2",
                     "memory.hidden_size=8", "progress_bar=false", "figures=false",
                     f"warm_start={tmp_path / 'nowhere'}", f"run_dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"warm_start={tmp_path / 'nowhere'}: no checkpoint there" in result.stderr
    assert "drop warm_start" in result.stderr
    assert not run_dir.exists()

"""``python -m rlmem.migrate``: runs of an older format (rlmem 0.1's untyped dict, or a config
without the keys added since) are rewritten once, every key written at what the run did; then
they evaluate and resume. Without it they are refused with a message naming the command."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from cli_runner import run_cli
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from rlmem import migrate
from rlmem.cells.irnn import IncrementalRNN, IRNNUpdate
from rlmem.evaluate import evaluate_run, load_run
from rlmem.runs import CheckpointMismatchError, load_checkpoint, resolved_config
from rlmem.runs.checkpoint import FORMAT, OlderCheckpointError, check_compatible
from rlmem.runs.lock import RunLock
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.supervised import register_supervised_configs
from rlmem.schema.train import register_train_configs
from rlmem.supervised import RESUME_SECTIONS
from rlmem.supervised import run as run_supervised
from rlmem.tasks.saved import load_saved_model
from rlmem.train import train as train_run

OLD_RUN = Path(__file__).parent / "fixtures" / "run_v0_1_raw_lstm"
"""A MemoryS7 lstm run written by rlmem 0.1 (format 1: before grid_encoding, forget_bias and
the typed checkpoint existed). Kept as it is: the migration's sample of rlmem 0.1."""

OLD_RECIPE = ["env=MemoryS7", "memory.hidden_size=16", "num_envs=2", "frames=512",
              "agent.frames_per_env=128", "progress_bar=false", "device=cpu"]
"""The fixture's run, trained further (to 512 frames)."""


def train_config(run_dir: Path, *overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*OLD_RECIPE, f"run_dir={run_dir}", *overrides])


def supervised_config(run_dir: Path, *overrides: str) -> DictConfig:
    register_supervised_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("supervised", overrides=[
            "seq_len=4", "batch_size=2", "iterations=2", "memory.hidden_size=8", "eval_every=1",
            "eval_batch_size=2", "progress_bar=false", "figures=false", "device=cpu",
            f"run_dir={run_dir}", *overrides])


def old_copy(tmp_path: Path) -> Path:
    run_dir = tmp_path / "old"
    shutil.copytree(OLD_RUN, run_dir)
    return run_dir


def aged(run_dir: Path, edit: Callable[[dict[str, Any]], None], found: int = 2) -> None:
    """Make ``run_dir`` a run of format ``found`` whose config (the checkpoint's and
    config.yaml's) ``edit`` strips of the keys added since, as a run of an older rlmem wrote
    it."""
    path = run_dir / "checkpoint.pt"
    payload = torch.load(path, weights_only=True)
    edit(payload["config"])
    payload["format"] = found
    torch.save(payload, path)
    recorded = OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml"))
    assert isinstance(recorded, dict)
    config = {str(key): value for key, value in recorded.items()}
    edit(config)
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))


def migrated(*run_dirs: Path) -> str:
    """``python -m rlmem.migrate <run_dirs>``, which must succeed; its stdout."""
    result = run_cli("rlmem.migrate", *map(str, run_dirs), cwd=run_dirs[0].parent)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def refused(*run_dirs: Path) -> str:
    """``rlmem.migrate.main`` on ``run_dirs``, which must fail; one line per error."""
    return "\n".join(run_dirs_errors(*run_dirs))


def run_dirs_errors(*run_dirs: Path) -> list[str]:
    import contextlib
    import io

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        assert migrate.main([str(run_dir) for run_dir in run_dirs]) == 1
    return stderr.getvalue().splitlines()


# --- rlmem 0.1's run -------------------------------------------------------------------------

def test_the_v0_1_run_is_refused_until_migrated_then_evaluates_and_resumes(
        tmp_path: Path) -> None:
    run_dir = old_copy(tmp_path)
    before = {path.name: path.read_bytes() for path in run_dir.iterdir()}
    marks = {".lock", ".rlmem-run"}  # a resume claims and locks the folder before it reads
    for read in (lambda: load_checkpoint(run_dir / "checkpoint.pt"), lambda: load_run(run_dir),
                 lambda: train_run(train_config(run_dir, "grid_encoding=raw"), run_dir)):
        with pytest.raises(OlderCheckpointError,
                           match=r"written by an older rlmem \(format 1\); run python -m "
                                 rf"rlmem.migrate {run_dir} once, then run this command again"):
            read()
    assert {path.name: path.read_bytes() for path in run_dir.iterdir()
            if path.name not in marks} == before

    report = migrated(run_dir)
    assert report.startswith(f"{run_dir}: migrated from format 1 (rlmem 0.1) to {FORMAT} "
                             "(checkpoint.pt and config.yaml rewritten): recorded ")
    assert "grid_encoding=raw" in report and "memory.forget_bias=null" in report
    assert "mission=false (was null)" in report and len(report.splitlines()) == 1
    assert {path.name for path in run_dir.iterdir()} - marks == {"checkpoint.pt",
                                                                 "config.yaml"}
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    config = checkpoint.config
    assert checkpoint.format == FORMAT and checkpoint.count("frames") == 256
    assert OmegaConf.to_container(OmegaConf.load(run_dir / "config.yaml")) == config
    # Every key of today's config, at what the run did: raw grid floats, torch's forget bias.
    assert config == migrate.complete_config(config)
    assert (config["grid_encoding"], config["mission"], config["direction"],
            config["wrappers"]) == ("raw", False, False, [])
    assert config["memory"] == {"name": "lstm", "hidden_size": 16, "num_layers": 1,
                                "dropout": 0.0, "forget_bias": None, "chrono_t_max": None}
    assert list(checkpoint.states) == ["model", "optimizer"] and list(checkpoint.rng) == [
        "torch"]
    old = torch.load(OLD_RUN / "checkpoint.pt", weights_only=True)
    for key, value in old["model"].items():
        assert torch.equal(checkpoint.states["model"][key], value), key

    assert migrated(run_dir) == f"{run_dir}: already current (format {FORMAT}); nothing changed\n"

    name, result, _ = evaluate_run(EvaluateConfig(run=str(run_dir), env="transfer", episodes=2,
                                                  num_envs=2))
    assert name == "MemoryS13" and result.episodes == 2
    assert (run_dir / "eval" / "MemoryS13_sampled_2ep_seed0.json").exists()
    with pytest.raises(CheckpointMismatchError,
                       match=r"(?s)memory.forget_bias: checkpoint has None, this run has "
                             r"1.0.*grid_encoding: checkpoint has 'raw', this run has "
                             r"'embedding'.*Resume it with memory.forget_bias=null "
                             r"grid_encoding=raw, or start afresh"):
        train_run(train_config(run_dir), run_dir)
    train_run(train_config(run_dir, "grid_encoding=raw", "memory.forget_bias=null"),
                    run_dir)
    assert load_checkpoint(run_dir / "checkpoint.pt").count("frames") == 512


def test_the_refusal_is_one_paragraph_from_the_cli(tmp_path: Path) -> None:
    run_dir = old_copy(tmp_path)
    result = run_cli("rlmem.evaluate", f"run={run_dir}", "episodes=1", "num_envs=1",
                     cwd=tmp_path)
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("rlmem.evaluate: error: ") and "python -m rlmem.migrate" in line
    assert "Traceback" not in result.stderr


# --- format 2: keys added since ------------------------------------------------------------------

def _without(*keys: str) -> Callable[[dict[str, Any]], None]:
    """An edit removing ``keys`` (``memory.<key>`` for the cell's) from a config."""
    def edit(config: dict[str, Any]) -> None:
        for key in keys:
            section, _, name = key.rpartition(".")
            (config[section] if section else config).pop(name)
    return edit


def test_a_supervised_run_before_seq_len_min_resumes_with_fixed_delays_only(
        tmp_path: Path) -> None:
    """A run written before ``seq_len_min``, ``confirm_batches`` and ``transfer_every``
    records them as it ran: every batch at seq_len, no confirmation, the transfer lengths at
    every evaluation; it resumes with its own config, and varied delays are refused."""
    run_dir = tmp_path / "run"
    run_supervised(supervised_config(run_dir, "eval_seq_lens=[6]"), run_dir)
    aged(run_dir, _without("seq_len_min", "confirm_batches", "transfer_every", "force",
                           "memory.chrono_t_max"))
    with pytest.raises(OlderCheckpointError, match="format 2"):
        load_saved_model(run_dir)
    report = migrated(run_dir)
    assert "from format 2 to" in report and "seq_len_min=null" in report
    config = load_checkpoint(run_dir / "checkpoint.pt").config
    assert (config["seq_len_min"], config["confirm_batches"], config["transfer_every"],
            config["memory"]["chrono_t_max"], config["memory"]["forget_bias"]) == (
        None, 0, 1, None, 1.0)
    check_compatible(config, resolved_config(supervised_config(run_dir)), RESUME_SECTIONS)
    with pytest.raises(CheckpointMismatchError, match=r"seq_len_min: checkpoint has None"):
        check_compatible(config, resolved_config(supervised_config(run_dir, "seq_len_min=2")),
                         RESUME_SECTIONS)
    result = run_supervised(supervised_config(run_dir, "iterations=3", "eval_seq_lens=[6]"),
                            run_dir)
    assert result.iteration == 3


def test_an_irnn_run_before_update_rule_records_eq5_in_its_config_and_weights(
        tmp_path: Path) -> None:
    """iRNN before ``update_rule`` ran Eq. 5 with α learned, and its weights recorded no rule:
    the migration writes both, so the run resumes with that rule, and the default (Eq. 8) is
    refused as another map."""
    run_dir = tmp_path / "run"
    eq5 = ("task=adding", "memory=irnn", "memory.update_rule=eq5", "memory.learn_alpha=true")
    run_supervised(supervised_config(run_dir, *eq5), run_dir)

    def before_the_option(config: dict[str, Any]) -> None:
        _without("memory.update_rule", "memory.learn_alpha")(config)

    aged(run_dir, before_the_option)
    payload = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    del payload["states"]["model"]["cell._extra_state"]
    torch.save(payload, run_dir / "checkpoint.pt")

    report = migrated(run_dir)
    assert "memory.update_rule=eq5" in report and "memory.learn_alpha=true" in report
    assert "weights record model.cell._extra_state" in report
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    assert int(checkpoint.states["model"]["cell._extra_state"]) == 5
    cell = load_saved_model(run_dir).model.cell
    assert isinstance(cell, IncrementalRNN) and cell.update_rule is IRNNUpdate.eq5
    with pytest.raises(CheckpointMismatchError, match="update_rule") as error:
        run_supervised(supervised_config(run_dir, "task=adding", "memory=irnn",
                                         "iterations=3"), run_dir)
    assert "learn_alpha" in str(error.value)
    assert run_supervised(supervised_config(run_dir, *eq5, "iterations=3"),
                          run_dir).iteration == 3


@pytest.mark.parametrize("program", ["supervised", "ppo"])
def test_a_run_before_flush_denormal_records_subnormals_kept_and_resumes(
        tmp_path: Path, program: str) -> None:
    """Format 4 had no ``flush_denormal``: its runs computed with subnormal floats, which the
    migration records (the key's default); they then resume as they ran, and not flushed."""
    run_dir = tmp_path / "run"
    if program == "supervised":
        run_supervised(supervised_config(run_dir), run_dir)
    else:
        train_run(train_config(run_dir, "env=CartPole-v1", "frames=256"), run_dir)
    aged(run_dir, _without("flush_denormal"), found=4)
    report = migrated(run_dir)
    assert "from format 4 to 5" in report and "flush_denormal=false" in report
    assert load_checkpoint(run_dir / "checkpoint.pt").config["flush_denormal"] is False
    assert OmegaConf.load(run_dir / "config.yaml").flush_denormal is False
    if program == "supervised":
        with pytest.raises(CheckpointMismatchError, match="flush_denormal"):
            run_supervised(supervised_config(run_dir, "flush_denormal=true"), run_dir)
        assert run_supervised(supervised_config(run_dir, "iterations=3"), run_dir).iteration == 3
    else:
        train_run(train_config(run_dir, "env=CartPole-v1", "frames=512"), run_dir)
        assert load_checkpoint(run_dir / "checkpoint.pt").count("frames") == 512


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_an_sb3_run_of_rlmem_0_1_is_sorted_into_the_typed_checkpoint(tmp_path: Path) -> None:
    """rlmem 0.1's sb3 checkpoint was a flat dict (policy, optimizer, rng, frames, updates);
    the migration sorts it and writes the agent keys added since at their defaults."""

    run_dir = tmp_path / "sb3"
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[
            "agent=sb3", "env=DoorKey-5x5", "num_envs=2", "agent.frames_per_env=16",
            "agent.batch_size=32", "agent.epochs=1", "memory.hidden_size=8", "frames=32",
            "progress_bar=false", "device=cpu", f"run_dir={run_dir}"])
    train_run(cfg, run_dir)
    current = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    # Today's grid encoder, which 0.1 did not have, stays recorded: the weights need it.
    then = _without("direction", "wrappers", "discrete_encoding", "env_kwargs",
                    "transfer_env", "force", "trust_run_config", "agent.policy",
                    "memory.forget_bias", "memory.chrono_t_max", "memory.num_layers",
                    "memory.dropout")
    config = dict(current["config"])
    then(config)
    flat = {"policy": current["states"]["policy"], "optimizer": current["states"]["optimizer"],
            "rng": current["rng"]["torch"], **current["progress"], "config": config}
    torch.save(flat, run_dir / "checkpoint.pt")
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(config))

    assert "from format 1 (rlmem 0.1)" in migrated(run_dir)
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    assert checkpoint.config["agent"]["policy"] == "memory"
    assert checkpoint.config["memory"]["forget_bias"] is None
    assert sorted(checkpoint.states) == ["optimizer", "policy"]
    assert checkpoint.count("frames") == 32 and checkpoint.rng["torch"].dtype == torch.uint8
    for key, value in current["states"]["policy"].items():
        assert torch.equal(checkpoint.states["policy"][key], value), key
    _, result, _ = evaluate_run(EvaluateConfig(run=str(run_dir), episodes=1, num_envs=1))
    assert result.episodes == 1


# --- safety ---------------------------------------------------------------------------------

def test_a_current_run_is_already_current_and_untouched(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_supervised(supervised_config(run_dir), run_dir)
    stamps = {path.name: path.stat().st_mtime_ns for path in run_dir.iterdir()}
    assert migrated(run_dir) == f"{run_dir}: already current (format {FORMAT}); nothing changed\n"
    assert {path.name: path.stat().st_mtime_ns for path in run_dir.iterdir()
            if path.name != ".lock"} == {key: value for key, value in stamps.items()
                                         if key != ".lock"}


def test_a_failed_write_keeps_the_old_checkpoint_beside_until_the_migration_succeeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir = old_copy(tmp_path)
    old = (run_dir / "checkpoint.pt").read_bytes()
    write = migrate.write_atomic

    def full_disk(path: Path, data: bytes | str) -> None:
        if path.name == "config.yaml":
            raise OSError(28, "No space left on device")
        write(path, data)

    monkeypatch.setattr(migrate, "write_atomic", full_disk)
    [line] = run_dirs_errors(run_dir)
    assert "could not be migrated: [Errno 28] No space left on device" in line
    assert "checkpoint.pt is migrated and its old version is kept as checkpoint.format1.pt" in line
    assert (run_dir / "checkpoint.format1.pt").read_bytes() == old
    monkeypatch.setattr(migrate, "write_atomic", write)
    report = migrated(run_dir)
    assert "completed" in report and "config.yaml rewritten" in report
    assert "removed checkpoint.format1.pt left by an interrupted migration" in report
    assert not (run_dir / "checkpoint.format1.pt").exists()
    assert load_checkpoint(run_dir / "checkpoint.pt").config == OmegaConf.to_container(
        OmegaConf.load(run_dir / "config.yaml"))


def test_what_is_not_migrated_is_said_in_one_paragraph_each(tmp_path: Path) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("nothing to see")
    parent = tmp_path / "runs"
    shutil.copytree(OLD_RUN, parent / "seed0")
    locked = old_copy(tmp_path)
    unreadable = tmp_path / "unreadable"
    shutil.copytree(OLD_RUN, unreadable)
    (unreadable / "checkpoint.pt").write_bytes(b"PK\x03\x04 cut")
    linked = tmp_path / "linked"
    shutil.copytree(OLD_RUN, linked)
    os.symlink(tmp_path / "elsewhere", linked / "progress.csv")
    before = (locked / "checkpoint.pt").read_bytes()
    with RunLock(locked):
        lines = run_dirs_errors(foreign, parent, locked, unreadable, linked,
                                tmp_path / "missing")
    assert len(lines) == 7  # one paragraph each, then how many were not migrated
    assert f"{foreign} is not an rlmem run directory" in lines[0]
    assert "Nothing was read or changed" in lines[0]
    assert f"It holds runs below it ({parent / 'seed0'})" in lines[1]
    assert f"{locked} is in use by another process (PID {os.getpid()})" in lines[2]
    assert "nothing was changed" in lines[2] and "once that run has stopped" in lines[2]
    assert "is unreadable" in lines[3] and f"Nothing in {unreadable} was changed" in lines[3]
    assert "holds symlinks" in lines[4]
    assert "does not exist" in lines[5]
    assert lines[6] == "rlmem.migrate: 6 of 6 runs were not migrated (see above)."
    assert (locked / "checkpoint.pt").read_bytes() == before
    assert not (unreadable / "checkpoint.format1.pt").exists()


def test_a_newer_format_is_refused_by_the_loader_and_the_migration(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_supervised(supervised_config(run_dir), run_dir)
    payload = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    payload["format"] = FORMAT + 1
    torch.save(payload, run_dir / "checkpoint.pt")
    with pytest.raises(Exception, match=rf"newer rlmem \(format {FORMAT + 1}"):
        load_checkpoint(run_dir / "checkpoint.pt")
    [line] = run_dirs_errors(run_dir)
    assert f"written by a newer rlmem (format {FORMAT + 1}" in line


def test_every_older_format_has_one_step() -> None:
    """The steps chain every older format to the current one, each a function of its own."""
    assert sorted(migrate.STEPS) == list(range(1, FORMAT))
    assert len(set(migrate.STEPS.values())) == len(migrate.STEPS)

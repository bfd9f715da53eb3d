"""One run of ``python -m rlmem.train`` resolves its command line once, into one frozen, typed
config that its trainer, its checkpoint and its ``config.yaml`` all hold (issue 52)."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_runner import TINY_PPO
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

import rlmem.agents.ppo.update
import rlmem.schema.train
from rlmem.agents.ppo import PPOConfig
from rlmem.agents.run_config import RunConfig
from rlmem.runs import load_checkpoint
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import TrainConfig, register_train_configs
from rlmem.train import run

PACKAGES = frozenset({Path(rlmem.schema.train.__file__).parents[1].name,
                      Path(rlmem.agents.ppo.update.__file__).parents[1].name})
"""The folders of rlmem's code that a run goes through: ``rlmem/``, ``agents/``."""


def _config(run_dir: Path, *overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*TINY_PPO, "memory.hidden_size=8",
                                           f"run_dir={run_dir}", *overrides])


def _counting_resolves(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig[Any]]:
    """Every module of rlmem that holds :func:`rlmem.schema.train.resolve` gets a wrapper
    that records what each call returned; the list it appends to."""
    original = rlmem.schema.train.resolve
    resolved: list[RunConfig[Any]] = []

    def counting(*args: Any, **kwargs: Any) -> RunConfig[Any]:
        config = original(*args, **kwargs)
        resolved.append(config)
        return config

    holders = [module for name, module in list(sys.modules.items())
               if name.startswith("rlmem") and getattr(module, "resolve", None) is original]
    assert rlmem.schema.train in holders
    for module in holders:
        monkeypatch.setattr(module, "resolve", counting)
    return resolved


def test_a_run_resolves_its_config_once_and_records_that_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    resolved = _counting_resolves(monkeypatch)
    built: list[RunConfig[Any]] = []
    init = RunConfig.__init__

    def counting_init(self: RunConfig[Any], *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(RunConfig, "__init__", counting_init)
    calls: list[list[str]] = []
    ppo_loss = rlmem.agents.ppo.update.ppo_loss

    def recording_loss(*args: Any, **kwargs: Any) -> Any:
        calls.append(_files_on_the_stack())
        return ppo_loss(*args, **kwargs)

    monkeypatch.setattr(rlmem.agents.ppo.update, "ppo_loss", recording_loss)
    run_dir = tmp_path / "run"
    run(_config(run_dir, "frames=32"))
    assert len(resolved) == 1 and built == resolved
    # From the CLI to the loss: four files on the stack to the call of ppo_loss (in the fifth,
    # agents/ppo/loss.py); the config was resolved beside them, in rlmem/schema/train.py.
    assert calls[0] == ["rlmem/train.py", "agents/ppo/__init__.py", "agents/ppo/train.py",
                        "agents/ppo/update.py"]
    config = resolved[0]
    assert isinstance(config.agent, PPOConfig) and config.agent.recurrence == 8
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 1  # type: ignore[misc]
    recorded = config.recorded()
    assert yaml.safe_load((run_dir / "config.yaml").read_text()) == recorded
    assert load_checkpoint(run_dir / "checkpoint.pt").config == recorded

    run(_config(run_dir, "frames=64"))  # resumed: once again, the checkpoint's decisions kept
    assert len(resolved) == 2 and built == resolved
    assert load_checkpoint(run_dir / "checkpoint.pt").count("frames") == 64


def _files_on_the_stack() -> list[str]:
    """The files of rlmem's code on the caller's stack, outermost first, each once."""
    files: list[str] = []
    for frame in reversed(inspect.stack()[2:]):
        path = Path(frame.filename)
        for depth, parent in enumerate(path.parents):
            if parent.name in PACKAGES and (parent.parent / "pyproject.toml").exists():
                name = "/".join([parent.name, *path.parts[len(path.parts) - depth - 1:]])
                if name not in files:
                    files.append(name)
                break
    return files


def test_the_run_config_has_the_keys_of_the_command_line() -> None:
    """Every key of :class:`TrainConfig` is a field of the run's config, in the same order,
    so ``config.yaml`` records them all."""
    assert ([field.name for field in dataclasses.fields(RunConfig)]
            == [field.name for field in dataclasses.fields(TrainConfig)])

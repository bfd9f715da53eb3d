"""Our PPO's presets: chosen from the env's family when the config is built, recorded in the
run's config, kept on resume and evaluation whatever the presets are later, and overruled by a
value the user gives."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from rlmem.agents.derived import with_derived_values
from rlmem.agents.ppo import presets
from rlmem.agents.ppo.presets import Preset, before_presets, decide_presets
from rlmem.cells.registry import DEFAULT_HIDDEN_SIZE, make_cell_from_config
from rlmem.envs.family import EnvFamily, env_family
from rlmem.evaluate import evaluate_run
from rlmem.migrate import format_3_to_4
from rlmem.runs import load_checkpoint
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs, resolve
from rlmem.train import train as train_run

TODAY = {"name": "ppo", "frames_per_env": 128, "epochs": 4, "batch_size": 256, "lr": 1e-3,
         "adam_eps": 1e-8, "gamma": 0.99, "gae_lambda": 0.95, "clip": 0.2,
         "entropy_coef": 0.01, "value_coef": 0.5, "max_grad_norm": 0.5, "clip_value": True,
         "normalize_advantage": False, "recurrence": 16}
"""Our PPO's defaults before presets (rlmem 0.2, rl-starter-files' recipe), key by key."""

TINY = ["num_envs=2", "frames=128", "agent.frames_per_env=64", "agent.batch_size=64",
        "agent.epochs=1", "progress_bar=false", "device=cpu", "memory=gru",
        "memory.hidden_size=8", "env=CartPole-v1"]
"""One update of 128 frames on CartPole (the generic preset), the recurrence left to it."""
LEFT_TO_PRESET = tuple(key for key in presets.PRESET_KEYS
                       if not any(item.startswith(f"agent.{key}=") for item in TINY))
"""The keys the preset decides in a :data:`TINY` run (it sets the rollout's shape)."""


def _compose(*overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=list(overrides))


@pytest.mark.parametrize("env", ["DoorKey-5x5", "MiniGrid-Empty-8x8-v0", "BabyAI-GoToLocal-v0"])
def test_a_minigrid_run_decides_todays_values(env: str) -> None:
    agent = resolve(_compose(f"env={env}", "memory=lstm")).recorded()["agent"]
    assert env_family(env) is EnvFamily.minigrid
    assert {key: agent[key] for key in TODAY} == TODAY
    assert (agent["preset"], agent["shared_memory"], agent["reward_scale"]) == (
        "minigrid", True, 1.0)


@pytest.mark.parametrize("env", ["CartPole-v1", "RepeatPreviousEasy"])
def test_any_other_env_decides_the_generic_preset(env: str) -> None:
    if env == "RepeatPreviousEasy":
        pytest.importorskip("popgym")
    agent = resolve(_compose(f"env={env}", "memory=lstm")).recorded()["agent"]
    generic = presets.PRESETS[Preset.generic]
    assert agent["preset"] == "generic"
    assert {key: agent[key] for key in presets.PRESET_KEYS} == {
        key: getattr(generic, key) for key in presets.PRESET_KEYS}


@pytest.mark.parametrize(("env", "size"), [("DoorKey-5x5", 64), ("CartPole-v1", 256)])
def test_the_preset_sizes_a_memory_left_null(env: str, size: int) -> None:
    """rlmem.train leaves memory.hidden_size null; the preset decides it (minigrid: the cells'
    default, every MiniGrid run's; generic: sb3-contrib's LSTM's) and the run records it."""
    assert _compose(f"env={env}", "memory=relstm").memory.hidden_size is None
    config = resolve(_compose(f"env={env}", "memory=relstm")).recorded()
    assert config["memory"]["hidden_size"] == size
    assert config["memory"]["name"] == "relstm"
    assert with_derived_values(config) == config
    assert presets.PRESETS[Preset.minigrid].memory_size == DEFAULT_HIDDEN_SIZE


def test_a_set_or_recorded_memory_size_is_kept() -> None:
    given = resolve(_compose("env=CartPole-v1", "memory=lstm", "memory.hidden_size=32")).recorded()
    assert given["memory"]["hidden_size"] == 32
    recorded = {**given, "memory": {**given["memory"], "hidden_size": 48}}
    resumed = resolve(_compose("env=CartPole-v1", "memory=lstm"), recorded).recorded()
    assert resumed["memory"]["hidden_size"] == 48  # a resumed run keeps its size
    sb3 = resolve(_compose("env=DoorKey-5x5", "memory=lstm", "agent=sb3")).recorded()
    assert sb3["memory"]["hidden_size"] == DEFAULT_HIDDEN_SIZE


def test_an_undecided_memory_size_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"memory.hidden_size of memory=gru is undecided"):
        make_cell_from_config({"name": "gru", "hidden_size": None}, input_size=3)


def test_the_users_values_win_over_the_preset() -> None:
    agent = resolve(_compose("env=CartPole-v1", "memory=lstm",
                                     "agent.normalize_advantage=false",
                                     "agent.recurrence=32")).recorded()["agent"]
    assert (agent["preset"], agent["normalize_advantage"], agent["recurrence"]) == (
        "generic", False, 32)
    named = resolve(_compose("env=CartPole-v1", "memory=lstm",
                                     "agent.preset=minigrid")).recorded()["agent"]
    assert {key: named[key] for key in TODAY} == TODAY


def test_a_decided_value_is_checked_when_the_config_is_built() -> None:
    """A batch of 48 frames cuts into chunks of 16 (minigrid's, fast's), so composing passes;
    CartPole's preset (generic) decides chunks of 64, and the decided config is refused."""
    with pytest.raises(ValueError, match=r"batch_size=48 must be a multiple of "
                                         r"agent.recurrence=64"):
        resolve(_compose("env=CartPole-v1", "memory=lstm", "agent.batch_size=48")).recorded()


def test_the_fast_preset_decides_the_envs_and_the_shape_of_the_work() -> None:
    """agent.preset=fast: its envs, rollout, epochs and minibatch, recorded; a value the user
    sets wins (num_envs, agent.epochs), and a run left to its family stays minigrid's 16 envs
    of 128 frames."""
    fast = presets.PRESETS[Preset.fast]
    config = resolve(_compose("memory=lstm", "agent.preset=fast")).recorded()
    assert (config["num_envs"], config["agent"]["frames_per_env"], config["agent"]["epochs"],
            config["agent"]["batch_size"]) == (fast.num_envs, fast.frames_per_env,
                                               fast.epochs, fast.batch_size)
    assert config["memory"]["hidden_size"] == fast.memory_size
    mine = resolve(_compose("memory=lstm", "agent.preset=fast", "num_envs=64",
                            "agent.epochs=3")).recorded()
    assert (mine["num_envs"], mine["agent"]["epochs"]) == (64, 3)
    plain = resolve(_compose("memory=lstm")).recorded()
    assert (plain["num_envs"], plain["agent"]["frames_per_env"]) == (16, 128)


def test_a_preset_whose_rollout_does_not_fill_its_minibatches_is_refused() -> None:
    with pytest.raises(ValueError, match=r"num_envs × frames_per_env=1520 must be a positive "
                                         r"multiple of 256"):
        dataclasses.replace(presets.PRESETS[Preset.fast], num_envs=95)


def test_a_recorded_config_decides_nothing_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    config = resolve(_compose("env=CartPole-v1", "memory=lstm")).recorded()
    monkeypatch.setitem(presets.PRESETS, Preset.generic, dataclasses.replace(
        presets.PRESETS[Preset.generic], normalize_advantage=False, shared_memory=False,
        recurrence=8, reward_scale=5.0, entropy_coef=0.5, memory_size=16))
    assert with_derived_values(config) == config
    # A resumed run's null keys take what its checkpoint decided, not today's preset.
    assert config["agent"]["recurrence"] != 8
    assert decide_presets({"name": "ppo", "preset": None, "recurrence": None},
                          "CartPole-v1", config["agent"])["recurrence"] == (
        config["agent"]["recurrence"])


def _recorded(run_dir: Path) -> dict[str, Any]:
    agent = yaml.safe_load((run_dir / "config.yaml").read_text())["agent"]
    assert agent == load_checkpoint(run_dir / "checkpoint.pt").config["agent"]
    return dict(agent)


def test_resume_and_evaluation_keep_the_recorded_preset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run keeps the values it recorded when the presets change: it resumes (its config
    still matches its checkpoint) and evaluates (its critic's cell is rebuilt as recorded);
    a new run takes the new values."""
    run = tmp_path / "run"
    train_run(_compose(*TINY, f"run_dir={run}"), run)
    first = _recorded(run)
    generic = presets.PRESETS[Preset.generic]
    assert first["preset"] == "generic"
    assert {key: first[key] for key in LEFT_TO_PRESET} == {
        key: getattr(generic, key) for key in LEFT_TO_PRESET}

    changed = dataclasses.replace(generic, normalize_advantage=not generic.normalize_advantage,
                                  shared_memory=not generic.shared_memory, recurrence=8,
                                  reward_scale=3.0, entropy_coef=0.5, memory_size=16)
    monkeypatch.setitem(presets.PRESETS, Preset.generic, changed)
    train_run(_compose(*TINY, "frames=256", f"run_dir={run}"), run)
    assert _recorded(run) == first
    assert load_checkpoint(run / "checkpoint.pt").count("frames") == 256
    _, result, _ = evaluate_run(EvaluateConfig(run=str(run), episodes=2, num_envs=2,
                                               device="cpu"))
    assert result.episodes == 2

    fresh = tmp_path / "fresh"
    train_run(_compose(*TINY, f"run_dir={fresh}"), fresh)
    decided = _recorded(fresh)
    assert {key: decided[key] for key in LEFT_TO_PRESET} == {
        "normalize_advantage": changed.normalize_advantage,
        "shared_memory": changed.shared_memory, "recurrence": 8, "reward_scale": 3.0,
        "entropy_coef": 0.5}
    monkeypatch.undo()  # today's presets again: the run evaluates with the cells it recorded
    _, result, _ = evaluate_run(EvaluateConfig(run=str(fresh), episodes=2, num_envs=2,
                                               device="cpu"))
    assert result.episodes == 2


def test_a_run_from_before_presets_migrates_to_the_values_it_had() -> None:
    config = {"env": "CartPole-v1", "memory": {"name": "gru"},
              "agent": dict(TODAY)}
    migrated = format_3_to_4({"config": config, "format": 3}, "checkpoint.pt")
    assert migrated["format"] == 4
    assert migrated["config"]["agent"] == {**TODAY, "preset": "minigrid",
                                           "shared_memory": True, "reward_scale": 1.0}
    sb3 = {"env": "DoorKey-5x5", "agent": {"name": "sb3"}}
    assert format_3_to_4({"config": sb3, "format": 3}, "c")["config"] == sb3
    agent = dict(TODAY)
    before_presets(agent)
    assert decide_presets(agent, "CartPole-v1") == agent  # nothing left to decide


def test_a_generic_run_recorded_before_the_entropy_key_keeps_its_bonus() -> None:
    """entropy_coef became a preset key (generic: no bonus) after generic runs had recorded
    rl-starter-files' 0.01: such a run resumes with 0.01, a new one takes 0."""
    fresh = resolve(_compose("env=CartPole-v1", "memory=lstm")).recorded()
    assert fresh["agent"]["entropy_coef"] == 0.0
    earlier = {**fresh, "agent": {**fresh["agent"], "entropy_coef": 0.01}}
    resumed = resolve(_compose("env=CartPole-v1", "memory=lstm"), earlier).recorded()
    assert resumed["agent"]["entropy_coef"] == 0.01
    given = resolve(_compose("env=CartPole-v1", "memory=lstm",
                                     "agent.entropy_coef=0.02"), earlier).recorded()
    assert given["agent"]["entropy_coef"] == 0.02

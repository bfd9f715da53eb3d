"""``python -m rlmem.evaluate``: transfer evaluation of a trained run, its JSON, GIFs, errors."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from cli_runner import TINY_PPO, run_cli
from full_attention_check import LONG_ENV, evaluate_without_overflow
from hydra import compose, initialize_config_dir

from rlmem import evaluate as evaluation
from rlmem.cells.memlstm import MemoryOverflowWarning
from rlmem.evaluate import IncompatibleEnvError, evaluate_run, report_name
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.train import train as train_run

WIDE_VIEW = "RlmemTest-DoorKey-8x8-View9-v0"


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of two tiny PPO updates with ReLSTM on GoToDoor-5x5 (its mission varies, so the
    mission encoder is part of the model; the 8x8 target's episodes are short)."""
    run_dir = tmp_path_factory.mktemp("run")
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[*TINY_PPO, "memory=relstm", "env=GoToDoor-5x5"])
    train_run(cfg, run_dir)
    return run_dir


def test_cli_evaluates_on_the_transfer_target_and_writes_json(trained_run: Path) -> None:
    result = run_cli("rlmem.evaluate", f"run={trained_run}", "env=transfer", "episodes=3",
                     "gif=1", "num_envs=2", "argmax=true", cwd=trained_run)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("GoToDoor-8x8: return "), result.stdout
    assert "3/3" in result.stderr  # the progress bar over the episodes
    assert f"Evaluated {trained_run} on GoToDoor-8x8 with greedy actions" in result.stdout
    report = json.loads((trained_run / "eval" / "GoToDoor-8x8_greedy_3ep_seed0.json").read_text())
    assert report["episodes"] == 3 and len(report["returns"]) == 3
    for key in ("return_mean", "return_std", "success_rate", "length_mean"):
        assert isinstance(report[key], float)
    assert report["trained_on"] == "GoToDoor-5x5" and report["argmax"] is True
    assert (trained_run / "eval" / "GoToDoor-8x8_greedy_3ep_seed0_0.gif").stat().st_size > 0
    assert report["interrupted"] is False


def test_any_env_with_the_same_observations_can_be_evaluated(trained_run: Path) -> None:
    name, result, _ = evaluate_run(EvaluateConfig(run=str(trained_run),
                                                  env="MiniGrid-Empty-5x5-v0",
                                                  episodes=4, num_envs=2))
    assert name == "MiniGrid-Empty-5x5-v0" and result.episodes == 4
    assert (trained_run / "eval" / "MiniGrid-Empty-5x5-v0_sampled_4ep_seed0.json").exists()


def test_an_incompatible_observation_space_is_an_error(trained_run: Path) -> None:
    if WIDE_VIEW not in gym.registry:
        gym.register(WIDE_VIEW, entry_point="minigrid.envs:DoorKeyEnv",
                     kwargs={"size": 8, "agent_view_size": 9})
    with pytest.raises(IncompatibleEnvError, match=r"shape \[9, 9, 3\].*shape \[7, 7, 3\]"):
        evaluate_run(EvaluateConfig(run=str(trained_run), env=WIDE_VIEW, episodes=1))
    with pytest.raises(ValueError, match="not a MiniGrid env"):
        evaluate_run(EvaluateConfig(run=str(trained_run), env="CartPole-v1", episodes=1))


@pytest.mark.parametrize("overrides, message", [
    ({"env": "DoorKey-16x16x"}, "unknown env 'DoorKey-16x16x'"),
    ({"episodes": 0}, "episodes must be positive"),
    ({"gif": 5, "episodes": 2}, "gif must be between 0 and episodes=2"),
])
def test_bad_evaluation_input(trained_run: Path, overrides: dict[str, object],
                              message: str) -> None:
    with pytest.raises((ValueError, KeyError), match=message):
        evaluate_run(EvaluateConfig(run=str(trained_run), **overrides))  # type: ignore[arg-type]


def test_missing_run_and_untargeted_env(tmp_path: Path, trained_run: Path) -> None:
    with pytest.raises(ValueError, match="no such run directory"):
        evaluate_run(EvaluateConfig(run=str(tmp_path / "nope")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"no checkpoint\.pt"):
        evaluate_run(EvaluateConfig(run=str(tmp_path / "empty")))


def test_eval_memory_overrides_weight_free_hyperparameters(trained_run: Path) -> None:
    """ReLSTM's ρ (like MemLSTM's capacity) sizes the state, not the weights: it may differ at
    evaluation time, and the JSON records it; a size that changes the weights is refused."""
    _, result, written = evaluate_run(EvaluateConfig(
        run=str(trained_run), env="GoToDoor-5x5", episodes=2, num_envs=2,
        eval_memory={"relevant": 9}))
    assert result.episodes == 2 and written is not None
    assert json.loads(written.read_text())["eval_memory"] == {"relevant": 9}
    with pytest.raises(ValueError, match=r"eval_memory=\{'hidden_size': 9\} changes the cell's "
                                         "weights"):
        evaluate_run(EvaluateConfig(run=str(trained_run), episodes=1,
                                    eval_memory={"hidden_size": 9}))


def test_memlstm_attends_over_every_step_of_the_evaluation_env(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """MemLSTM trained with a capacity below the evaluation env's step limit is evaluated with
    full attention (the capacity raised to the limit, said and recorded), not a sliding window;
    an ``eval_memory`` given by hand wins."""
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[*TINY_PPO, "memory=memlstm", "memory.capacity=8",
                                          "env=GoToDoor-5x5"])
    with warnings.catch_warnings():  # its training episodes outgrow capacity=8 too
        warnings.simplefilter("ignore", MemoryOverflowWarning)
        train_run(cfg, tmp_path)
    limit = gym.make(LONG_ENV).unwrapped.max_steps  # type: ignore[attr-defined]
    _, written = evaluate_without_overflow(tmp_path, episodes=4)
    assert written.name == f"{LONG_ENV}_sampled_4ep_seed0,capacity={limit}.json"
    assert json.loads(written.read_text())["eval_memory"] == {"capacity": limit}
    assert (f"memlstm (trained with capacity=8) is evaluated with capacity={limit}"
            in capsys.readouterr().out)
    with pytest.warns(MemoryOverflowWarning):
        _, _, window = evaluate_run(EvaluateConfig(run=str(tmp_path), env=LONG_ENV, episodes=4,
                                                   num_envs=2, progress_bar=False,
                                                   eval_memory={"capacity": 8}))
    assert window is not None and json.loads(window.read_text())["eval_memory"] == {
        "capacity": 8}
    assert "full attention" not in capsys.readouterr().out


class _CtrlC:
    """An actor that acts as ``actor`` does, and raises KeyboardInterrupt (Ctrl-C) at its
    ``stop``-th step."""

    def __init__(self, actor: Any, stop: int) -> None:
        self.actor, self.stop, self.steps = actor, stop, 0

    def initial_state(self, num_envs: int) -> Any:
        return self.actor.initial_state(num_envs)

    def act(self, *args: Any) -> Any:
        self.steps += 1
        if self.steps == self.stop:
            raise KeyboardInterrupt
        return self.actor.act(*args)


def test_ctrl_c_keeps_the_episodes_done_marked_interrupted(
        trained_run: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 31, item 4: an interrupted evaluation writes what it did, and says so."""
    real = evaluation.evaluate_policy

    def interrupted(actor: Any, *args: Any, **kwargs: Any) -> Any:
        return real(_CtrlC(actor, stop=40), *args, **kwargs)

    monkeypatch.setattr(evaluation, "evaluate_policy", interrupted)
    cfg = EvaluateConfig(run=str(trained_run), env="GoToDoor-5x5", episodes=50, num_envs=2,
                         seed=7)
    name, result, written = evaluate_run(cfg)
    assert result.interrupted and 0 < result.episodes < 50
    assert written == trained_run / "eval" / "GoToDoor-5x5_sampled_50ep_seed7.json"
    report = json.loads(written.read_text())
    assert report["interrupted"] is True and len(report["returns"]) == result.episodes
    said = evaluation.summary(cfg, name, result, written)
    assert f"Interrupted after {result.episodes} of 50 episodes" in said and str(written) in said

    # Ctrl-C before any episode ended: nothing to keep, the interrupt goes on.
    monkeypatch.setattr(evaluation, "evaluate_policy",
                        lambda actor, *args, **kwargs: real(_CtrlC(actor, stop=1), *args,
                                                            **kwargs))
    with pytest.raises(KeyboardInterrupt):
        evaluate_run(EvaluateConfig(run=str(trained_run), env="GoToDoor-5x5", episodes=2,
                                    num_envs=2, seed=8))
    assert not (trained_run / "eval" / "GoToDoor-5x5_sampled_2ep_seed8.json").exists()


def test_evaluations_of_other_settings_do_not_replace_each_other() -> None:
    """Issue 31, item 6."""
    names = {report_name("DoorKey-16x16", argmax=argmax, episodes=episodes, seed=seed,
                         eval_memory=memory)
             for argmax in (False, True) for episodes in (2, 100) for seed in (0, 1)
             for memory in ({}, {"capacity": 2560})}
    assert len(names) == 16
    assert report_name("DoorKey-16x16") == "DoorKey-16x16_sampled_100ep_seed0"
    assert report_name("ALE/Pong-v5", argmax=True, eval_memory={"capacity": 9}) == \
        "ALE_Pong-v5_greedy_100ep_seed0,capacity=9"

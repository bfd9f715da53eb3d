"""Our PPO on any gymnasium env: encoders and action heads chosen by the spaces, ``env_kwargs``,
``wrappers`` and ``transfer_env`` in the recorded config, evaluation on all of them, refusals
before any work; and (``-m slow``) the check that memory matters on CartPole without its
velocities."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from gym_envs import DICT_CUE, TEXT_OBSERVATION
from gymnasium import spaces
from hydra import compose, initialize_config_dir
from locations import TESTS
from omegaconf import DictConfig, OmegaConf
from torch import Tensor, nn

from rlmem.agents.minigrid_encoders import ImageEncoder, MissionEncoder
from rlmem.agents.ppo import model as model_module
from rlmem.agents.ppo.heads import (
    CategoricalHead,
    GaussianHead,
    MultiCategoricalHead,
    UnsupportedActionSpaceError,
    make_action_head,
)
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.observation import (
    UnsupportedObservationSpaceError,
    check_observation_space,
    field_encoder,
)
from rlmem.agents.ppo.space_encoders import DiscreteEncoder, PixelEncoder, VectorEncoder
from rlmem.cells import Cell, make_cell_from_config
from rlmem.envs import GridSpace, IncompatibleEnvError, MissionSpace, make_env
from rlmem.evaluate import evaluate_run
from rlmem.runs import CheckpointMismatchError, load_checkpoint
from rlmem.runs.checkpoint import load_payload
from rlmem.schema.evaluate import EvaluateConfig
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs, resolve
from rlmem.train import train as train_run

MASKED = "wrappers=[gym_envs:MaskVelocity]"
OLD_RUN = TESTS / "fixtures" / "run_v0_1_raw_lstm"


def _compose(*overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=list(overrides))


def _rows(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "progress.csv").open(newline="") as file:
        return list(csv.DictReader(file))


# --- encoders and heads, chosen by the space's type ---------------------------------------------

@pytest.mark.parametrize("space, encoder, after_memory, size", [
    (GridSpace(0, 2, (7, 7, 3), np.uint8), ImageEncoder, False, 64),  # indices of every table
    (MissionSpace(0, 60, (32,), np.int64), MissionEncoder, True, 128),
    (spaces.Box(-1, 1, (4,)), VectorEncoder, False, 64),
    (spaces.Box(-1, 1, (2, 3)), VectorEncoder, False, 64),
    (spaces.Box(0, 255, (7, 7, 3), np.uint8), VectorEncoder, False, 64),   # too small for a CNN
    (spaces.Box(0, 255, (64, 48, 3), np.uint8), PixelEncoder, False, 256),
    (spaces.Box(0, 255, (1, 40, 40), np.uint8), PixelEncoder, False, 256),
    (spaces.MultiBinary(5), VectorEncoder, False, 64),
    (spaces.Discrete(5, start=-2), DiscreteEncoder, False, 5),
    (spaces.MultiDiscrete([3, 4]), DiscreteEncoder, False, 7),
])
def test_each_field_gets_its_encoder_by_the_type_of_its_space(
        space: spaces.Space[Any], encoder: type, after_memory: bool, size: int) -> None:
    module = field_encoder(space)
    assert type(module) is encoder and module.after_memory is after_memory
    assert module.output_size == size
    batch = torch.as_tensor(np.stack([space.sample() for _ in range(3)]))
    assert module(batch).shape == (3, size)


def test_discrete_fields_are_one_hot_or_embedded() -> None:
    space = spaces.MultiDiscrete([3, 4], start=[1, 0])
    onehot = field_encoder(space, discrete_encoding="onehot")
    out = onehot(torch.tensor([[1, 0], [3, 3]]))
    assert out.tolist() == [[1, 0, 0, 1, 0, 0, 0], [0, 0, 1, 0, 0, 0, 1]]
    embedded = field_encoder(space, discrete_encoding="embedding")
    assert isinstance(embedded, DiscreteEncoder)
    assert embedded.output_size == 16 and embedded(torch.tensor([[1, 0]])).shape == (1, 16)
    # Component 0's value 1 (its first) and component 1's value 0 (its first) are distinct rows.
    rows = torch.tensor([[1, 0]]) - embedded.start + embedded.offsets
    assert rows.tolist() == [[0, 3]]


@pytest.mark.parametrize("space", [
    spaces.Text(8),
    spaces.Graph(spaces.Box(0, 1, (2,)), None),
    spaces.Sequence(spaces.Discrete(3)),
    spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))),
    spaces.Dict({"inner": spaces.Dict({"x": spaces.Discrete(2)})}),
    spaces.Dict({"mission": MissionSpace(0, 60, (32,), np.int64)}),
])
def test_an_unencodable_observation_space_is_refused(space: spaces.Space[Any]) -> None:
    with pytest.raises(UnsupportedObservationSpaceError,
                       match=r"cannot encode|nothing for the memory"):
        check_observation_space(space)


def _reference_distribution(head: Any, params: Tensor) -> torch.distributions.Distribution:
    if isinstance(head, CategoricalHead):
        return torch.distributions.Categorical(logits=params)
    if isinstance(head, GaussianHead):
        return torch.distributions.Independent(
            torch.distributions.Normal(params, head.log_std.exp().expand_as(params)), 1)
    raise AssertionError(head)


@pytest.mark.parametrize("space", [spaces.Discrete(3, start=1), spaces.MultiDiscrete([3, 2]),
                                   spaces.Box(-1.0, 2.0, (2,)), spaces.Box(-1.0, 1.0, (2, 2))])
def test_action_heads_sample_score_and_act_within_the_space(space: spaces.Space[Any]) -> None:
    torch.manual_seed(0)
    head = make_action_head(space)
    params = torch.randn(64, head.num_params) * 3
    with torch.no_grad():  # as in the rollout
        actions, log_probs = head.sample(params)
    assert actions.shape == (64, *head.action_shape) and actions.dtype == head.action_dtype
    again, entropy = head.log_prob_entropy(params, actions)
    torch.testing.assert_close(again, log_probs)
    if isinstance(head, MultiCategoricalHead):
        parts = [torch.distributions.Categorical(logits=logits)
                 for logits in params.split(head.sizes, dim=-1)]
        expected = sum(part.log_prob(actions[:, i]) for i, part in enumerate(parts))
        expected_entropy = sum(part.entropy() for part in parts)
    else:
        reference = _reference_distribution(head, params)
        expected, expected_entropy = reference.log_prob(actions), reference.entropy()
    torch.testing.assert_close(log_probs, expected)
    torch.testing.assert_close(entropy, expected_entropy)
    env_actions = head.env_action(actions)
    assert space.shape is not None
    assert env_actions.shape == (64, *space.shape)
    assert all(space.contains(action) for action in env_actions)
    with torch.no_grad():
        greedy, _ = head.sample(params, greedy=True)
    if isinstance(head, GaussianHead):
        torch.testing.assert_close(greedy, params)  # the mode is the mean
        # Log-probabilities are those of the unclipped sample; only the env's action is clipped.
        assert (actions.abs() > 2).any()
        assert isinstance(space, spaces.Box)
        assert np.allclose(env_actions.reshape(64, -1),
                           np.clip(actions.numpy(), space.low.reshape(-1),
                                   space.high.reshape(-1)))


def test_an_unsupported_action_space_is_refused() -> None:
    with pytest.raises(UnsupportedActionSpaceError, match="supported: Discrete, MultiDiscrete"):
        make_action_head(spaces.MultiBinary(3))


# --- MiniGrid: the same model as before ---------------------------------------------------------

def test_the_minigrid_model_keeps_its_parameter_names_and_order() -> None:
    """Old checkpoints (and their optimizer states, stored by parameter order) still load."""
    env = make_env("GoToDoor-5x5")
    model = ActorCritic(env.observation_space, env.action_space, {"name": "lstm",
                                                                 "hidden_size": 8})
    names = [name for name, _ in model.named_parameters()]
    memory = [f"memory.{name}" for name, _ in make_cell_from_config(
        {"name": "lstm", "hidden_size": 8}, input_size=64).named_parameters()]
    assert names == [
        "image.embedding.weight", "image.net.0.weight", "image.net.0.bias",
        "image.net.3.weight", "image.net.3.bias", "image.net.5.weight", "image.net.5.bias",
        "mission.embedding.weight", "mission.gru.weight_ih_l0", "mission.gru.weight_hh_l0",
        "mission.gru.bias_ih_l0", "mission.gru.bias_hh_l0", *memory,
        "actor.0.weight", "actor.0.bias", "actor.2.weight", "actor.2.bias",
        "critic.0.weight", "critic.0.bias", "critic.2.weight", "critic.2.bias"]
    # rlmem 0.1's weights, read raw (rlmem.migrate moves them into a checkpoint unchanged).
    payload = load_payload(OLD_RUN / "checkpoint.pt")
    old_env = make_env("MemoryS7")
    old = ActorCritic(old_env.observation_space, old_env.action_space,
                      payload["config"]["memory"], grid_encoding="raw")
    old.load_state_dict(payload["model"])  # strict: the same keys and shapes


# --- end to end ---------------------------------------------------------------------------------

def test_masked_cartpole_trains_and_evaluates_through_the_clis(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """``env=CartPole-v1 memory=relstm`` with a wrapper from the user's own module."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get(
        "PYTHONPATH", "")]))
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.train", "env=CartPole-v1", "memory=relstm", MASKED, *TINY_PPO,
                     f"run_dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = OmegaConf.load(run_dir / "config.yaml")
    assert config.env == "CartPole-v1" and list(config.wrappers) == ["gym_envs:MaskVelocity"]
    assert [int(float(row["frames"])) for row in _rows(run_dir)] == [32, 64]
    checkpoint = load_checkpoint(run_dir / "checkpoint.pt")
    assert checkpoint.extras["spaces"] == {"observation": "float32 Box of shape [2]",
                                           "action": "Discrete(2)"}

    # The run names the tests' own module (gym_envs): evaluating it is an explicit opt-in.
    evaluated = run_cli("rlmem.evaluate", f"run={run_dir}", "episodes=3", "num_envs=2",
                        "trust_run_config=true", cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    summary = next(line for line in evaluated.stdout.splitlines()
                   if line.startswith("CartPole-v1: return "))
    assert "success" not in summary
    report = json.loads((run_dir / "eval" / "CartPole-v1_sampled_3ep_seed0.json").read_text())
    assert report["episodes"] == 3 and report["trained_on"] == "CartPole-v1"
    assert report["success_rate"] is None  # a positive return is not a success here


def test_pendulum_box_actions_run_end_to_end(tmp_path: Path) -> None:
    train_run(_compose("env=Pendulum-v1", "memory=gru", *TINY_PPO), tmp_path)
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint.count("frames") == 64 and "action.log_std" in checkpoint.states["model"]
    rows = _rows(tmp_path)
    assert all(np.isfinite(float(row["loss/policy"])) for row in rows)
    name, result, written = evaluate_run(EvaluateConfig(run=str(tmp_path), episodes=2,
                                                        num_envs=2, argmax=True, gif=1))
    assert name == "Pendulum-v1" and result.episodes == 2 and result.length_mean == 200
    gif = tmp_path / "eval" / "Pendulum-v1_greedy_2ep_seed0_0.gif"
    assert written is not None and gif.stat().st_size


@pytest.mark.parametrize("encoding", ["onehot", "embedding"])
def test_a_dict_and_multidiscrete_env_runs_end_to_end(encoding: str, tmp_path: Path) -> None:
    """Box, Discrete and MultiDiscrete fields through the memory; MultiDiscrete actions."""
    env = f"gym_envs:{DICT_CUE}"
    train_run(_compose(f"env={env}", "memory=lstm", f"discrete_encoding={encoding}",
                             *TINY_PPO), tmp_path)
    weights = load_checkpoint(tmp_path / "checkpoint.pt").states["model"]
    assert "position.net.0.weight" in weights
    for field in ("cue", "grid"):  # one-hot has no weights
        assert (f"{field}.embedding.weight" in weights) == (encoding == "embedding")
    name, result, _ = evaluate_run(EvaluateConfig(run=str(tmp_path), episodes=4, num_envs=2,
                                                  trust_run_config=True))
    assert name == env and result.episodes == 4 and result.length_mean == 8


@pytest.mark.filterwarnings("ignore:.*CartPole-v0 is out of date")
def test_env_kwargs_and_transfer_env_reach_training_and_evaluation(tmp_path: Path) -> None:
    cfg = _compose("env=CartPole-v1", "+env_kwargs.max_episode_steps=12",
                   "transfer_env=CartPole-v0", *TINY_PPO)
    resolve(cfg)
    train_run(cfg, tmp_path)
    assert all(float(row["length_mean"]) <= 12 for row in _rows(tmp_path)
               if row["length_mean"] != "nan")
    for env in (None, "transfer"):  # the default is the transfer target where there is one
        name, result, _ = evaluate_run(EvaluateConfig(run=str(tmp_path), env=env, episodes=4,
                                                      num_envs=2))
        assert name == "CartPole-v0" and result.length_mean <= 12
    name, result, _ = evaluate_run(EvaluateConfig(run=str(tmp_path), env="CartPole-v1",
                                                  episodes=2, num_envs=2))
    assert name == "CartPole-v1" and result.length_mean <= 12


def test_a_wrapper_with_kwargs_is_recorded_and_resuming_keeps_it(tmp_path: Path) -> None:
    wrapped = 'wrappers=[{target: "gym_envs:MaskVelocity", kwargs: {keep: [0]}}]'
    train_run(_compose("env=CartPole-v1", wrapped, *TINY_PPO, "frames=32"), tmp_path)
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint.config["wrappers"] == [{"target": "gym_envs:MaskVelocity",
                                              "kwargs": {"keep": [0]}}]
    assert checkpoint.extras["spaces"]["observation"] == "float32 Box of shape [1]"
    with pytest.raises(CheckpointMismatchError, match=r"wrappers: checkpoint has \[\{"):
        train_run(_compose("env=CartPole-v1", MASKED, *TINY_PPO), tmp_path)
    with pytest.raises(CheckpointMismatchError, match=r"env_kwargs\.max_episode_steps"):
        train_run(_compose("env=CartPole-v1", wrapped, "+env_kwargs.max_episode_steps=9",
                                 *TINY_PPO), tmp_path)
    train_run(_compose("env=CartPole-v1", wrapped, *TINY_PPO), tmp_path)
    assert load_checkpoint(tmp_path / "checkpoint.pt").count("frames") == 64


# --- refused before any work --------------------------------------------------------------------

@pytest.mark.parametrize("overrides, error, message", [
    ((f"env=gym_envs:{TEXT_OBSERVATION}",), ValueError,
     r"env=gym_envs:RlmemTest-Text-v0: cannot encode observations of Text"),
    (("env=CartPole-v1", "transfer_env=Pendulum-v1"), IncompatibleEnvError,
     r"transfer_env=Pendulum-v1 observes float32 Box of shape \[3\] instead of float32 Box of "
     r"shape \[4\] and acts in float32 Box of shape \[1\] instead of Discrete\(2\)"),
    (("env=DoorKey-5x5", "transfer_env=CartPole-v1"), IncompatibleEnvError,
     "transfer_env=CartPole-v1 observes"),
    (("env=CartPole-v1", "wrappers=[no_such_module:Wrapper]"), ValueError,
     "cannot import 'no_such_module'"),
    (("env=CartPole-v1", "wrappers=[gymnasium.wrappers:NoSuchWrapper]"), ValueError,
     "'gymnasium.wrappers' has no 'NoSuchWrapper'"),
    (("env=CartPole-v1", "wrappers=[{module: x}]"), ValueError,
     r"wrappers\[0\]=.*give an import path"),
    (("env=CartPole-v1", "wrappers=[{target: gymnasium.wrappers:TimeLimit, kwargs: {steps: 3}}]"),
     ValueError, r"wrapper 'gymnasium.wrappers:TimeLimit' refused the env it wraps, "
     r"<.*CartPole.*> \(gymnasium.make's own wrappers included\), with kwargs \{'steps': 3\}: "
     r"TypeError \(.*'steps'\)"),
    (("env=FrozenLake-v1", "wrappers=[gym_envs:MaskVelocity]"), ValueError,
     r"wrapper 'gym_envs:MaskVelocity' refused .*FrozenLake.*: AssertionError: assert "
     r"isinstance\(space, spaces.Box\), at .*gym_envs\.py:\d+$"),
    (("env=CartPole-v1", "agent=sb3"), ValueError,
     "agent=sb3 trains MiniGrid envs.*env=CartPole-v1 is not a MiniGrid env"),
    (("env=CartPole-v1", "mission=true"), ValueError, "CartPole-v1 is not a MiniGrid env"),
    (("env=CartPole-v1", "discrete_encoding=binary"), ValueError,
     "discrete_encoding='binary'; use one of onehot, embedding"),
    (("env=CartPole-v1", "transfer_env=CartPole-v9"), KeyError, "unknown env 'CartPole-v9'"),
])
def test_bad_env_combinations_are_refused_before_any_work(
        overrides: tuple[str, ...], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        resolve(_compose(*overrides))


def test_the_cli_refuses_an_unencodable_env_before_writing_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get(
        "PYTHONPATH", "")]))
    result = run_cli("rlmem.train", f"env=gym_envs:{TEXT_OBSERVATION}", *TINY_PPO,
                     f"run_dir={tmp_path / 'run'}", cwd=tmp_path)
    assert result.returncode == 1
    assert "cannot encode observations of Text" in result.stderr, result.stderr[-2000:]
    run_dir = tmp_path / "run"  # Hydra may make the directory; nothing is written into it
    assert not run_dir.exists() or not any(run_dir.iterdir())


def test_evaluation_refuses_an_env_with_other_spaces(tmp_path: Path) -> None:
    train_run(_compose("env=CartPole-v1", MASKED, *TINY_PPO, "frames=32"), tmp_path)
    # Acrobot, masked like CartPole, observes 2 numbers too, but has 3 actions.
    with pytest.raises(IncompatibleEnvError, match=r"acts in Discrete\(3\) instead of "
                                                   r"Discrete\(2\)"):
        evaluate_run(EvaluateConfig(run=str(tmp_path), env="Acrobot-v1", episodes=1,
                                    trust_run_config=True))
    with pytest.raises(KeyError, match=r"has no transfer target.*transfer_env="):
        evaluate_run(EvaluateConfig(run=str(tmp_path), env="transfer", episodes=1,
                                    trust_run_config=True))
    assert not (tmp_path / "eval").exists()


# --- slow: memory matters on CartPole without velocities ----------------------------------------

class FeedForwardState(NamedTuple):
    h: Tensor
    """The last output, ``(B, hidden_size)``; never read."""


class FeedForward(Cell):
    """``y_t = tanh(W x_t + b)``: the memory's place taken by a layer that remembers nothing.

    Shapes:
        - x: ``(T, B, input_size)``; output: ``(T, B, hidden_size)``
    """

    state_type = FeedForwardState

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__(input_size, hidden_size)
        self.layer = nn.Linear(input_size, hidden_size)

    def state_shapes(self) -> dict[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {"h": ((self.hidden_size,), None)}

    def step(self, x_t: Tensor, state: Any) -> tuple[Tensor, Any, dict[str, Tensor]]:
        y = torch.tanh(self.layer(x_t))
        return y, FeedForwardState(y), {}


SLOW_FRAMES = 151_552
"""74 updates of 16 envs × 128 frames: enough for lstm and relstm to balance the masked pole
for 300+ steps over 100 episodes."""

SLOW_RECIPE = ("env=CartPole-v1", "wrappers=[gym_envs:MaskVelocity,gym_envs:ScaleReward]",
               "agent.entropy_coef=0.0", f"frames={SLOW_FRAMES}", "progress_bar=false")
"""Masked CartPole with rewards of 0.01 (returns the clipped critic can follow) and no entropy
bonus (next to rewards that small it would keep the policy from committing); PPO's other
settings are the defaults."""


def _balanced_steps(memory: str, run_dir: Path) -> tuple[float, float]:
    """The best and the final mean episode length (steps balanced, 500 at most) over the last
    100 episodes, as logged after each update."""
    train_run(_compose(*SLOW_RECIPE, f"memory={memory}"), run_dir)
    steps = [float(row["return_recent"]) / 0.01 for row in _rows(run_dir)]
    return max(steps), steps[-1]


@pytest.mark.slow
def test_memory_matters_on_cartpole_without_velocities(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Observing only the cart's position and the pole's angle, lstm and relstm in our PPO
    learn to balance the pole (a mean of 300+ steps over 100 consecutive episodes); the same
    agent with its memory replaced by a feed-forward layer does not (below 100).

    Measured (seed 0, 150k frames; best / final mean over the last 100 episodes): lstm 489 /
    486, relstm 420 / 420 (443 / 258 in an earlier version: PPO without a learning-rate decay
    wobbles), feed-forward 54 / 50.
    """
    steps = {memory: _balanced_steps(memory, tmp_path / memory) for memory in ("lstm", "relstm")}
    monkeypatch.setattr(model_module, "make_cell_from_config",
                        lambda memory, input_size: FeedForward(input_size, memory["hidden_size"]))
    steps["feedforward"] = _balanced_steps("lstm", tmp_path / "feedforward")
    print("masked CartPole, steps balanced (best, final mean of 100 episodes):", steps)
    assert steps["lstm"][0] > 300 and steps["relstm"][0] > 300, steps
    assert steps["feedforward"][0] < 100, steps

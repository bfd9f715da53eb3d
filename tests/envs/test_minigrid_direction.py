"""``direction=true``: MiniGrid's compass heading as an observation field, in our PPO, in sb3 and
in evaluation; refused for envs that have none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from gymnasium import spaces
from minigrid.minigrid_env import MiniGridEnv
from omegaconf import OmegaConf
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env

from rlmem.agents.ppo.space_encoders import DiscreteEncoder
from rlmem.agents.sb3 import MiniGridExtractor, MultiInputMemoryPolicy
from rlmem.envs import EnvOptions, make_env
from rlmem.evaluate import evaluate_run
from rlmem.runs import load_checkpoint
from rlmem.schema.evaluate import EvaluateConfig


def _fields(direction: bool) -> dict[str, spaces.Space[Any]]:
    space = make_env("MemoryS7", direction=direction).observation_space
    assert isinstance(space, spaces.Dict)
    return dict(space.spaces)


def test_the_field_is_the_agents_heading_at_every_step() -> None:
    env = make_env("MemoryS7", direction=True)
    assert _fields(True)["direction"] == spaces.Discrete(4)
    observation, _ = env.reset(seed=0)
    unwrapped = env.unwrapped
    assert isinstance(unwrapped, MiniGridEnv)
    headings = [int(observation["direction"])]
    for _ in range(4):  # turn left four times: every heading once
        observation, *_ = env.step(unwrapped.actions.left)
        assert env.observation_space.contains(observation)
        assert int(observation["direction"]) == unwrapped.agent_dir
        headings.append(int(observation["direction"]))
    assert sorted(set(headings)) == [0, 1, 2, 3]
    assert "direction" not in _fields(False)


def test_an_env_without_a_heading_is_refused() -> None:
    with pytest.raises(ValueError, match=r"direction=true .* CartPole-v1 is not a MiniGrid env"):
        make_env("CartPole-v1", direction=True)


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_run_trains_with_it_records_it_and_evaluates_with_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_cli("rlmem.train", "env=MemoryS7", "memory=gru", "memory.hidden_size=8",
                     "direction=true", f"run_dir={run}", *TINY_PPO, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = OmegaConf.load(run / "config.yaml")
    assert config.direction is True
    assert EnvOptions.from_config({"direction": True, "env": "MemoryS7"}).direction
    checkpoint = load_checkpoint(run / "checkpoint.pt")
    assert "direction: Discrete(4)" in checkpoint.extras["spaces"]["observation"]
    # The memory reads the 64 grid features and the 4 of the one-hot heading.
    assert checkpoint.states["model"]["memory.rnn.weight_ih_l0"].shape[1] == 64 + 4
    name, outcome, _ = evaluate_run(EvaluateConfig(run=str(run), env="transfer", episodes=2,
                                                   num_envs=2))
    assert name == "MemoryS13" and outcome.episodes == 2


def test_the_ppo_model_encodes_it_one_hot_into_the_memory() -> None:
    space = _fields(True)["direction"]
    assert isinstance(space, spaces.Discrete)
    encoder = DiscreteEncoder(space, "onehot")
    assert not encoder.after_memory
    assert torch.equal(encoder(torch.arange(4)), torch.eye(4))


def test_sb3_adds_the_heading_to_the_extractors_features() -> None:
    env = make_vec_env(lambda: make_env("MemoryS7", direction=True), n_envs=2, seed=0)
    model = RecurrentPPO(MultiInputMemoryPolicy, env, n_steps=16, n_epochs=1, seed=0,
                         policy_kwargs=dict(memory="gru", memory_kwargs={"hidden_size": 8},
                                            features_extractor_class=MiniGridExtractor,
                                            normalize_images=False))
    extractor = model.policy.features_extractor
    assert isinstance(extractor, MiniGridExtractor)
    assert extractor.directions == 4 and extractor.features_dim == extractor.image.output_size + 4
    model.learn(32)
    plain = MiniGridExtractor(make_env("MemoryS7").observation_space)
    assert plain.features_dim == extractor.features_dim - 4


def test_sb3_refuses_a_field_it_does_not_encode() -> None:
    space = spaces.Dict({"image": spaces.Box(0, 10, (7, 7, 3), np.uint8),
                         "compass": spaces.Discrete(4)})
    with pytest.raises(ValueError, match=r"also has \['compass'\]"):
        MiniGridExtractor(space)

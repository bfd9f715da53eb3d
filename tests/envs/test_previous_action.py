"""rlmem.envs.previous_action.PreviousAction: the previous action and a first-step flag in
each observation, for every kind of action space, across episodes of a vector env, and through
our PPO as a ``wrappers=`` entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from cli_runner import TINY_PPO
from gym_envs import DICT_CUE
from gymnasium import spaces
from hydra import compose, initialize_config_dir

from rlmem.envs import make_env, make_vector_env
from rlmem.envs.previous_action import ACTION_KEY, FIRST_KEY, PreviousAction
from rlmem.envs.spaces import OBSERVATION_FIELD
from rlmem.runs import load_checkpoint
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.train import train as train_run

WRAPPER = "rlmem.envs.previous_action:PreviousAction"


def test_each_observation_carries_the_action_before_it() -> None:
    env = make_env("CartPole-v1", wrappers=[WRAPPER])
    assert env.observation_space == spaces.Dict({
        OBSERVATION_FIELD: gym.make("CartPole-v1").observation_space,
        ACTION_KEY: spaces.Discrete(2), FIRST_KEY: spaces.Discrete(2)})
    first, _ = env.reset(seed=0)
    assert first[ACTION_KEY] == 0 and first[FIRST_KEY] == 1  # no action yet: 0, flagged
    for action in (1, 0, 1):
        observation = env.step(action)[0]
        assert observation[ACTION_KEY] == action and observation[FIRST_KEY] == 0
        assert env.observation_space.contains(observation)
    assert env.reset(seed=1)[0][FIRST_KEY] == 1


def test_a_dict_observation_gains_the_two_keys_and_a_clash_is_refused() -> None:
    env = make_env(f"gym_envs:{DICT_CUE}", wrappers=[WRAPPER])
    inner = make_env(f"gym_envs:{DICT_CUE}").observation_space
    assert isinstance(env.observation_space, spaces.Dict)
    assert isinstance(inner, spaces.Dict)
    assert set(env.observation_space.spaces) == {*inner.spaces, ACTION_KEY, FIRST_KEY}
    assert env.observation_space[ACTION_KEY] == env.action_space  # MultiDiscrete
    observation, _ = env.reset(seed=0)
    assert isinstance(env.action_space, spaces.MultiDiscrete)
    assert np.array_equal(observation[ACTION_KEY], np.zeros_like(env.action_space.nvec))
    action = env.action_space.sample()
    assert np.array_equal(env.step(action)[0][ACTION_KEY], action)
    with pytest.raises(ValueError, match=r"already has \['first', 'previous_action'\]"):
        PreviousAction(env)


def test_a_continuous_action_starts_at_zero_or_the_nearest_bound() -> None:
    env = make_env("Pendulum-v1", wrappers=[WRAPPER])
    observation, _ = env.reset(seed=0)
    assert observation[ACTION_KEY].dtype == np.float32
    assert np.array_equal(observation[ACTION_KEY], [0.0])
    assert np.allclose(env.step(np.array([1.5], dtype=np.float32))[0][ACTION_KEY], [1.5])
    positive = gym.wrappers.RescaleAction(gym.make("Pendulum-v1"), np.float32(1.0),
                                          np.float32(2.0))
    assert np.array_equal(PreviousAction(positive).reset(seed=0)[0][ACTION_KEY], [1.0])


def test_an_action_space_it_cannot_observe_is_refused() -> None:
    class TupleActions(gym.Env[np.ndarray, tuple[Any, ...]]):
        def __init__(self) -> None:
            self.observation_space = spaces.Box(0.0, 1.0, (1,))
            self.action_space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2)))

    with pytest.raises(ValueError, match=r"cannot add actions of Tuple"):
        PreviousAction(TupleActions())


def test_a_vector_envs_next_episode_starts_flagged_and_without_an_action() -> None:
    """With gymnasium's same-step autoreset, the step that ends an episode returns the next
    episode's first observation: flagged, its action the none value, not the one just taken."""
    envs = make_vector_env("CartPole-v1", 2, wrappers=[
        {"target": "gymnasium.wrappers:TimeLimit", "kwargs": {"max_episode_steps": 2}},
        WRAPPER])
    observation, _ = envs.reset(seed=0)
    assert list(observation[FIRST_KEY]) == [1, 1]
    observation = envs.step(np.array([1, 1]))[0]
    assert list(observation[FIRST_KEY]) == [0, 0] and list(observation[ACTION_KEY]) == [1, 1]
    observation, _, terminated, truncated, info = envs.step(np.array([1, 0]))
    ended = terminated | truncated
    assert ended.all()  # the 2-step limit
    assert list(observation[FIRST_KEY]) == [1, 1] and list(observation[ACTION_KEY]) == [0, 0]
    # The finished episodes' last observations hold the actions that ended them.
    assert [info["final_obs"][k][ACTION_KEY] for k in range(2)] == [1, 0]


def test_our_ppo_trains_on_it_and_records_it(tmp_path: Path) -> None:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        config = compose("train", overrides=["env=CartPole-v1", f"wrappers=[{WRAPPER}]",
                                             *TINY_PPO, "frames=32"])
    train_run(config, tmp_path)
    checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    assert checkpoint.config["wrappers"] == [WRAPPER]
    assert ACTION_KEY in checkpoint.extras["spaces"]["observation"]


def test_on_a_minigrid_env_it_is_refused_not_dropped() -> None:
    """MiniGrid's encoding reads only MiniGrid's own fields: the two added ones would vanish
    without a word, so a wrapper that adds fields is refused there, naming them."""
    with pytest.raises(ValueError, match=r"a wrapper added \['first', 'previous_action'\] to "
                                         r"MiniGrid's observation"):
        make_env("DoorKey-5x5", wrappers=[WRAPPER])

"""rlmem.envs: names, transfer pairs, the fixed mission vocabulary, vectorised envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from minigrid.minigrid_env import MiniGridEnv

from rlmem.envs import (
    ENVS,
    VOCABULARY,
    GridSpace,
    MiniGridObservation,
    MissionSpace,
    env_spec,
    make_env,
    make_vector_env,
    tokenize,
    transfer_target,
    uses_mission,
)
from rlmem.envs.minigrid_observation import PAD, UNKNOWN

PAPER_PAIRS = {
    "DoorKey-5x5": "DoorKey-16x16",
    "RedBlueDoors-6x6": "RedBlueDoors-8x8",
    "GoToObject-6x6-N2": "GoToObject-8x8-N2",
    "MemoryS7": "MemoryS13",
    "GoToDoor-5x5": "GoToDoor-8x8",
    "Fetch-5x5-N2": "Fetch-8x8-N3",
}


def test_the_papers_six_pairs() -> None:
    assert {name: spec.transfer for name, spec in ENVS.items() if spec.transfer} == PAPER_PAIRS


@pytest.mark.parametrize("name", sorted(ENVS))
def test_every_short_name_is_a_registered_gymnasium_id(name: str) -> None:
    assert ENVS[name].id in gym.registry
    env = make_env(name)
    observation, _ = env.reset(seed=0)
    assert observation["image"].shape == (7, 7, 3)
    assert env.observation_space.contains(observation)
    env.close()


def test_full_ids_are_accepted() -> None:
    assert env_spec("MiniGrid-Empty-8x8-v0").id == "MiniGrid-Empty-8x8-v0"
    assert transfer_target("MiniGrid-DoorKey-5x5-v0") == "DoorKey-16x16"
    observation, _ = make_env("MiniGrid-Empty-8x8-v0").reset(seed=0)
    assert set(observation) == {"image"}


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown env 'DoorKey-7x7'.*DoorKey-5x5.*MemoryS7"):
        env_spec("DoorKey-7x7")
    with pytest.raises(KeyError, match=r"no transfer target.*DoorKey-5x5->DoorKey-16x16"):
        transfer_target("MiniGrid-Empty-8x8-v0")


def test_non_minigrid_envs_are_rejected() -> None:
    """MiniGrid's observation encoding refuses other envs; make_env gives them none."""
    with pytest.raises(ValueError, match="not a MiniGrid env"):
        MiniGridObservation(gym.make("CartPole-v1"), mission=False)
    env = make_env("CartPole-v1")
    assert not isinstance(env, MiniGridObservation) and env.observation_space.shape == (4,)
    with pytest.raises(ValueError, match="CartPole-v1 is not a MiniGrid env"):
        make_env("CartPole-v1", mission=True)


@pytest.mark.parametrize("name, varies", [("DoorKey-5x5", False), ("MemoryS7", False),
                                          ("RedBlueDoors-6x6", False), ("GoToDoor-5x5", True),
                                          ("Fetch-5x5-N2", True), ("GoToObject-6x6-N2", True)])
def test_mission_only_where_it_varies(name: str, varies: bool) -> None:
    assert uses_mission(name) == varies
    space = make_env(name).observation_space
    assert isinstance(space, gym.spaces.Dict)
    assert ("mission" in space.spaces) == varies


def test_the_vocabulary_is_fixed_and_shared_by_train_and_transfer_envs() -> None:
    tokens = tokenize("go to the red door")
    assert [VOCABULARY[i] for i in tokens[:5]] == ["go", "to", "the", "red", "door"]
    assert (tokens[5:] == PAD).all()
    assert tokenize("frobnicate the key")[0] == UNKNOWN
    for train, target in PAPER_PAIRS.items():
        for name in (train, target):
            env = make_env(name, mission=True)
            observation, _ = env.reset(seed=1)
            assert isinstance(env.unwrapped, MiniGridEnv)
            mission = env.unwrapped.mission
            assert (observation["mission"] == tokenize(mission)).all()
            assert UNKNOWN not in observation["mission"], mission


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_vector_envs_autoreset_in_the_same_step(vectorization: str) -> None:
    envs = make_vector_env("DoorKey-5x5", 2, vectorization=vectorization)
    observation, _ = envs.reset(seed=0)
    assert observation["image"].shape == (2, 7, 7, 3)
    ended = False
    for _ in range(300):  # a random policy hits the 250-step limit
        observation, _, terminated, truncated, info = envs.step(np.array([0, 2]))
        if (terminated | truncated).any():
            ended = True
            index = int(np.flatnonzero(terminated | truncated)[0])
            assert info["_final_obs"][index]
            assert info["final_obs"][index]["image"].shape == (7, 7, 3)
            break
    envs.close()
    assert ended


def test_bad_vectorization_is_rejected() -> None:
    with pytest.raises(ValueError, match="sync, async"):
        make_vector_env("DoorKey-5x5", 2, vectorization="threads")


def test_any_gymnasium_env_with_kwargs_and_wrappers() -> None:
    """Other envs keep their observations; kwargs reach gymnasium.make and wrappers apply in
    order; ``module:EnvId`` imports the module first."""
    assert env_spec("CartPole-v1").transfer is None
    with pytest.raises(KeyError, match="cannot import 'no_such_module'"):
        env_spec("no_such_module:Thing-v0")
    env = make_env("CartPole-v1", wrappers=[
        {"target": "gymnasium.wrappers:TimeLimit", "kwargs": {"max_episode_steps": 3}},
        "gymnasium.wrappers:RecordEpisodeStatistics"])
    assert isinstance(env, gym.wrappers.RecordEpisodeStatistics)
    env.reset(seed=0)
    assert [env.step(0)[3] for _ in range(3)] == [False, False, True]
    empty = make_env("MiniGrid-Empty-5x5-v0", max_steps=7).unwrapped
    assert isinstance(empty, MiniGridEnv)
    assert empty.max_steps == 7


def test_minigrid_encoding_comes_after_the_wrappers() -> None:
    """A wrapper sees MiniGrid's own observations; the grid stays a GridSpace when it is the
    agent's view (a wider one too), and pixels stay a plain Box."""
    wider = make_env("DoorKey-5x5", wrappers=[
        {"target": "minigrid.wrappers:ViewSizeWrapper", "kwargs": {"agent_view_size": 9}}])
    assert isinstance(wider, MiniGridObservation)
    assert isinstance(wider.observation_space, gym.spaces.Dict)
    assert type(wider.observation_space["image"]) is GridSpace
    assert wider.reset(seed=0)[0]["image"].shape == (9, 9, 3)
    pixels = make_env("DoorKey-5x5", wrappers=["minigrid.wrappers:RGBImgPartialObsWrapper"])
    assert isinstance(pixels.observation_space, gym.spaces.Dict)
    assert type(pixels.observation_space["image"]) is gym.spaces.Box
    assert pixels.reset(seed=0)[0]["image"].shape == (56, 56, 3)
    go_to_door = make_env("GoToDoor-5x5").observation_space
    assert isinstance(go_to_door, gym.spaces.Dict)
    assert type(go_to_door["mission"]) is MissionSpace

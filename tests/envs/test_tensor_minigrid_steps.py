"""The tensor MiniGrid envs step as MiniGrid's own (issue 54, (a) and (c)).

From the same state (:meth:`~rlmem.envs.tensor.minigrid.MiniGridTensorEnv.from_reference` copies
the envs of rlmem's gymnasium vector path) and the same random actions, every observation (the
encoder's input, the 7x7 view with its visibility mask), reward, ``terminated`` and
``truncated`` is equal to MiniGrid's, and so is the last observation of an ended episode
(``final_obs``). After an auto-reset the two backends' layouts differ draw for draw (their random
streams differ; the layouts' distributions are compared in
``test_tensor_minigrid_generation.py``), so the tensor envs are copied afresh from the
gymnasium envs' new episodes, whose first observations are compared too.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv
from minigrid.minigrid_env import MiniGridEnv

from rlmem.agents.minigrid_encoders import ImageEncoder
from rlmem.agents.ppo.observation import observation_to_tensors
from rlmem.envs import make_vector_env
from rlmem.envs.tensor.minigrid import DoorKey, Memory, MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.objects import DOOR, EMPTY, OPEN

DOORKEYS = ["MiniGrid-DoorKey-5x5-v0", "MiniGrid-DoorKey-6x6-v0", "MiniGrid-DoorKey-8x8-v0",
            "MiniGrid-DoorKey-16x16-v0"]
MEMORIES = ["MiniGrid-MemoryS7-v0", "MiniGrid-MemoryS9-v0", "MiniGrid-MemoryS11-v0",
            "MiniGrid-MemoryS13-v0", "MiniGrid-MemoryS13Random-v0", "MiniGrid-MemoryS17Random-v0"]
FAMILY: dict[str, type[MiniGridTensorEnv]] = {
    **dict.fromkeys(DOORKEYS, DoorKey), **dict.fromkeys(MEMORIES, Memory)}

ACTION_WEIGHTS = np.array([0.15, 0.15, 0.4, 0.1, 0.05, 0.1, 0.05])
"""left, right, forward, pickup, drop, toggle, done: every action, forward most, so that the
walks reach keys, doors and goals more often than uniform actions would."""


def assert_same_observation(gymnasium: dict[str, np.ndarray], tensor: dict[str, torch.Tensor],
                            envs: np.ndarray, at: str) -> None:
    """Every field of the given envs' observations equal, dtype included."""
    assert set(gymnasium) == set(tensor), at
    if not envs.size:
        return
    for key, value in gymnasium.items():
        expected, got = np.asarray(value)[envs], tensor[key].cpu().numpy()[envs]
        assert got.dtype == expected.dtype, f"{at}: {key} {got.dtype} != {expected.dtype}"
        mismatch = np.flatnonzero((got != expected).reshape(len(envs), -1).any(axis=1))
        assert not mismatch.size, f"{at}: {key} differs in envs {envs[mismatch]}"


def final_observations(info: dict[str, Any], envs: np.ndarray) -> dict[str, np.ndarray]:
    """gymnasium's ``final_obs`` (an object array of per-env dicts) of ``envs``, stacked."""
    first = info["final_obs"][envs[0]]
    stacked = {key: np.stack([info["final_obs"][i][key] for i in envs]) for key in first}
    return {key: _spread(value, envs) for key, value in stacked.items()}


def _spread(rows: np.ndarray, envs: np.ndarray) -> np.ndarray:
    """``rows`` (one per env of ``envs``) placed at those envs' indices of a batch."""
    batch = np.zeros((int(envs.max()) + 1, *rows.shape[1:]), dtype=rows.dtype)
    batch[envs] = rows
    return batch


def lockstep(name: str, num_envs: int, steps: int, seed: int, *, mission: bool = False,
             direction: bool = False, **env_kwargs: Any) -> Counter[str]:
    """Step rlmem's gymnasium vector env and its tensor copy with the same random actions,
    asserting every output equal; return how often the walks met what the tests want met."""
    family = FAMILY[name]
    gymnasium = make_vector_env(name, num_envs, mission=mission, direction=direction,
                                env_kwargs=env_kwargs)
    assert isinstance(gymnasium, SyncVectorEnv)
    observation, _ = gymnasium.reset(seed=seed)
    tensor = family.from_reference(gymnasium.envs, mission=mission, direction=direction)
    assert tensor.single_observation_space == gymnasium.single_observation_space
    assert tensor.single_action_space == gymnasium.single_action_space
    assert_same_observation(observation, tensor._observe(), np.arange(num_envs), "reset")
    rng, met = np.random.default_rng(seed), Counter[str]()
    for step in range(steps):
        actions = rng.choice(len(ACTION_WEIGHTS), size=num_envs, p=ACTION_WEIGHTS)
        observation, reward, terminated, truncated, info = gymnasium.step(actions)
        got, got_reward, got_terminated, got_truncated, got_info = tensor.step(actions)
        at = f"{name}, step {step}"
        assert got_reward.dtype == torch.float64
        assert np.array_equal(got_reward.numpy(), reward), at
        assert np.array_equal(got_terminated.numpy(), terminated), at
        assert np.array_equal(got_truncated.numpy(), truncated), at
        ended = terminated | truncated
        assert np.array_equal(got_info["_final_obs"].numpy(), ended), at
        assert isinstance(got, dict)
        assert_same_observation(observation, got, np.flatnonzero(~ended), at)
        if ended.any():
            assert_same_observation(final_observations(info, np.flatnonzero(ended)),
                                    got_info["final_obs"], np.flatnonzero(ended), at + " (final)")
            tensor = family.from_reference(gymnasium.envs, mission=mission, direction=direction)
            assert_same_observation(observation, tensor._observe(), np.flatnonzero(ended),
                                    at + " (new episode)")
        met.update(success=int((reward > 0).sum()), terminated=int(terminated.sum()),
                   truncated=int(truncated.sum()),
                   carrying=int((tensor.carrying[:, 0] != EMPTY).sum()),
                   open_door=int(((tensor.grid[..., 0] == DOOR)
                                  & (tensor.grid[..., 2] == OPEN)).any(dim=(1, 2)).sum()))
    gymnasium.close()
    return met


def test_doorkey_5x5_steps_as_minigrid() -> None:
    """1,024 steps of DoorKey-5x5 with short episodes: keys carried, doors opened, a goal
    reached, episodes truncated, all equal."""
    met = lockstep("MiniGrid-DoorKey-5x5-v0", 8, 128, seed=2, max_steps=60)
    assert min(met["carrying"], met["open_door"], met["success"], met["truncated"]) > 0, met


def test_memory_s7_steps_as_minigrid() -> None:
    """1,024 steps of MemoryS7 with short episodes: successes, failures, truncations."""
    met = lockstep("MiniGrid-MemoryS7-v0", 8, 128, seed=4, max_steps=30)
    assert met["success"] > 0 and met["terminated"] > met["success"] and met["truncated"] > 0, met


@pytest.mark.parametrize("name", DOORKEYS)
def test_doorkey_goal_reward_as_minigrid(name: str) -> None:
    """The agent put in front of the goal, some steps into its episode, walks onto it: the
    same reward ``1 - 0.9 * step_count / max_steps`` and end in both."""
    gymnasium = make_vector_env(name, 3)
    gymnasium.reset(seed=8)
    assert isinstance(gymnasium, SyncVectorEnv)
    for index, env in enumerate(gymnasium.envs):
        world = env.unwrapped
        assert isinstance(world, MiniGridEnv)
        world.agent_pos, world.agent_dir = (world.width - 2, world.height - 3), 1  # facing south
        world.step_count = 17 * index
    tensor = DoorKey.from_reference(gymnasium.envs)
    forward = np.full(3, 2)
    _, reward, terminated, truncated, _ = gymnasium.step(forward)
    _, got_reward, got_terminated, got_truncated, _ = tensor.step(forward)
    assert terminated.all() and (reward > 0).all()
    assert np.array_equal(got_reward.numpy(), reward)
    assert np.array_equal(got_terminated.numpy(), terminated)
    assert np.array_equal(got_truncated.numpy(), truncated)


@pytest.mark.parametrize("name", [*DOORKEYS[1:], *MEMORIES[1:]])
def test_every_size_steps_as_minigrid(name: str) -> None:
    """A short walk in every other size, with the direction and mission fields too."""
    lockstep(name, 4, 24, seed=5, mission=True, direction=True, max_steps=12)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*DOORKEYS, *MEMORIES])
def test_ten_thousand_steps_as_minigrid(name: str) -> None:
    """10,240 steps per env, MiniGrid's own episode lengths and a shortened one."""
    met = lockstep(name, 16, 320, seed=6)
    met += lockstep(name, 16, 320, seed=7, max_steps=40)
    assert met["truncated"] > 0 and met["carrying" if name in DOORKEYS else "terminated"] > 0, met


def test_the_encoder_sees_identical_tensors() -> None:
    """(c): the observations of both backends, made tensors as the trainer makes them, are equal
    in dtype, shape and value, and the grid encoder gives equal features for them."""
    gymnasium = make_vector_env("DoorKey-5x5", 4)
    observation, _ = gymnasium.reset(seed=11)
    assert isinstance(gymnasium, SyncVectorEnv)
    tensor = DoorKey.from_reference(gymnasium.envs)
    encoder = ImageEncoder((7, 7, 3))
    rng = np.random.default_rng(11)
    for _ in range(20):
        expected = observation_to_tensors(observation, torch.device("cpu"))
        got = tensor._observe()
        assert expected.keys() == got.keys()
        for key in expected:
            assert expected[key].dtype == got[key].dtype and torch.equal(expected[key], got[key])
        assert torch.equal(encoder(expected["image"]), encoder(got["image"]))
        actions = rng.integers(0, 7, size=4)
        observation, *_ = gymnasium.step(actions)
        tensor.step(actions)
        tensor = DoorKey.from_reference(gymnasium.envs)

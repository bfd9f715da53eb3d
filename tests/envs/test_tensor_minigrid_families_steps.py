"""The tensor Fetch, GoToObject, GoToDoor and RedBlueDoors step as MiniGrid's own (issue 54,
item 3, (a) and (c)), mission included.

The walks are those of ``test_tensor_minigrid_steps.py`` (:func:`tensor_minigrid_check.lockstep`):
from the same state and the same random actions, every observation (the view, with or without
the visibility mask, and the tokenised mission), reward, ``terminated`` and ``truncated`` equal
to MiniGrid's.
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv
from minigrid.envs import RedBlueDoorEnv
from tensor_minigrid_check import lockstep

from rlmem.agents.minigrid_encoders import ImageEncoder, MissionEncoder
from rlmem.agents.ppo.observation import observation_to_tensors
from rlmem.envs import make_vector_env
from rlmem.envs.minigrid_observation import VOCABULARY
from rlmem.envs.tensor.minigrid import (
    Fetch,
    GoToDoor,
    GoToObject,
    MiniGridTensorEnv,
    RedBlueDoors,
)

FAMILIES: dict[str, type[MiniGridTensorEnv]] = {
    "MiniGrid-Fetch-5x5-N2-v0": Fetch, "MiniGrid-Fetch-6x6-N2-v0": Fetch,
    "MiniGrid-Fetch-8x8-N3-v0": Fetch,
    "MiniGrid-GoToObject-6x6-N2-v0": GoToObject, "MiniGrid-GoToObject-8x8-N2-v0": GoToObject,
    "MiniGrid-GoToDoor-5x5-v0": GoToDoor, "MiniGrid-GoToDoor-6x6-v0": GoToDoor,
    "MiniGrid-GoToDoor-8x8-v0": GoToDoor,
    "MiniGrid-RedBlueDoors-6x6-v0": RedBlueDoors, "MiniGrid-RedBlueDoors-8x8-v0": RedBlueDoors,
}
"""Every registered size of each family, and its tensor env."""


@pytest.mark.parametrize("name", ["MiniGrid-Fetch-5x5-N2-v0", "MiniGrid-GoToObject-6x6-N2-v0",
                                  "MiniGrid-GoToDoor-5x5-v0"])
def test_steps_as_minigrid(name: str) -> None:
    """1,024 steps with short episodes: the mission met (the right object fetched, ``done``
    next to the right object or door), failed (a wrong one, ``done`` elsewhere, ``toggle``),
    truncated; every observation, mission included, equal."""
    met = lockstep(name, FAMILIES[name], 8, 128, seed=2, mission=True, max_steps=20)
    assert met["success"] > 0 and met["terminated"] > met["success"] and met["truncated"] > 0, met


def _face(world: gym.Env, door: str) -> None:
    """Put the agent of a RedBlueDoors world inside its room, facing its ``door``."""
    assert isinstance(world, RedBlueDoorEnv)
    index = next(i for i, cell in enumerate(world.grid.grid) if cell is getattr(world, door))
    x, y = index % world.width, index // world.width
    world.agent_pos, world.agent_dir = ((x + 1, y), 2) if door == "red_door" else ((x - 1, y), 0)


def test_red_blue_doors_ends_as_minigrid() -> None:
    """The doors opened in every order: red then blue (rewarded), blue first, red closed
    again before blue, red toggled while blue is open (all 0); the same rewards, ends and
    observations in both, each step from the MiniGrid state just before it."""
    gymnasium = make_vector_env("RedBlueDoors-6x6", 4)
    gymnasium.reset(seed=3)
    assert isinstance(gymnasium, SyncVectorEnv)
    worlds = [env.unwrapped for env in gymnasium.envs]
    toggle, right = 5, 1
    # per step, per env: the door to face first (None: as it is), and the action
    plan: list[list[tuple[str | None, int]]] = [
        [("red_door", toggle), ("red_door", toggle), ("red_door", toggle), ("blue_door", toggle)],
        [("blue_door", toggle), (None, toggle), ("red_door", right), (None, right)],
        [(None, right), ("blue_door", toggle), ("red_door", toggle), (None, right)],
    ]
    rewarded = []
    for step, moves in enumerate(plan):
        for world, (door, _) in zip(worlds, moves, strict=True):
            if door is not None:
                _face(world, door)
        if step == 2:  # env 2: the blue door opened behind the agent's back
            assert isinstance(worlds[2], RedBlueDoorEnv)
            worlds[2].blue_door.is_open = True
        tensor = RedBlueDoors.from_reference(gymnasium.envs)
        actions = np.array([action for _, action in moves])
        observation, reward, terminated, truncated, _ = gymnasium.step(actions)
        got, got_reward, got_terminated, got_truncated, _ = tensor.step(actions)
        assert np.array_equal(got_reward.numpy(), reward), step
        assert np.array_equal(got_terminated.numpy(), terminated), step
        assert np.array_equal(got_truncated.numpy(), truncated), step
        assert isinstance(got, dict)
        kept = ~terminated
        assert np.array_equal(got["image"].numpy()[kept], observation["image"][kept]), step
        rewarded.append(reward > 0)
    assert np.array_equal(np.array(rewarded), [[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0]])


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_size_steps_as_minigrid(name: str) -> None:
    """A short walk in every size, with the direction and mission fields."""
    lockstep(name, FAMILIES[name], 4, 24, seed=5, mission=True, direction=True,
             max_steps=12)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(FAMILIES))
def test_ten_thousand_steps_as_minigrid(name: str) -> None:
    """10,240 steps per env, MiniGrid's own episode lengths and a shortened one."""
    met = lockstep(name, FAMILIES[name], 16, 320, seed=6, mission=True)
    met += lockstep(name, FAMILIES[name], 16, 320, seed=7, mission=True,
                    max_steps=40)
    # Random walks fetch and go to objects and doors; in RedBlueDoors they open doors (rarely
    # the red one and then the blue one: test_red_blue_doors_ends_as_minigrid opens them so).
    met_too = "open_door" if FAMILIES[name] is RedBlueDoors else "success"
    assert met["truncated"] > 0 and met["terminated"] > 0 and met[met_too] > 0, met


@pytest.mark.parametrize("name", list(FAMILIES))
def test_the_encoders_see_identical_tensors(name: str) -> None:
    """(c): both backends' observations, made tensors as the trainer makes them, are equal in
    dtype, shape and value, and the grid and mission encoders give equal features."""
    gymnasium = make_vector_env(name, 4, mission=True)
    observation, _ = gymnasium.reset(seed=11)
    assert isinstance(gymnasium, SyncVectorEnv)
    family = FAMILIES[name]
    tensor = family.from_reference(gymnasium.envs, mission=True)
    image, mission = ImageEncoder((7, 7, 3)), MissionEncoder(len(VOCABULARY))
    rng = np.random.default_rng(11)
    for _ in range(10):
        expected = observation_to_tensors(observation, torch.device("cpu"))
        got = tensor._observe()
        assert expected.keys() == got.keys() == {"image", "mission"}
        for key in expected:
            assert expected[key].dtype == got[key].dtype and torch.equal(expected[key], got[key])
        assert torch.equal(image(expected["image"]), image(got["image"]))
        assert torch.equal(mission(expected["mission"]), mission(got["mission"]))
        actions = rng.integers(0, 7, size=4)
        observation, *_ = gymnasium.step(actions)
        tensor.step(actions)
        tensor = family.from_reference(gymnasium.envs, mission=True)


@pytest.mark.parametrize("family", [
    lambda: Fetch(32, size=5, num_objs=2, max_steps=7, mission=True),
    lambda: GoToObject(32, size=6, num_objs=2, max_steps=7, mission=True),
    lambda: GoToDoor(32, size=8, max_steps=7, mission=True),
    lambda: RedBlueDoors(32, size=6, max_steps=7, mission=True)])
def test_masked_resets_are_the_indexed_ones(family: Callable[[], MiniGridTensorEnv]) -> None:
    """The GPU's way of auto-resetting (every env laid out, the ended ones selected) gives the
    same envs, missions and targets as the CPU's (only the ended ones laid out)."""
    indexed, masked = family(), family()
    masked.masked_resets = True
    indexed.reset(seed=9)
    masked.reset(seed=9)
    rng = np.random.default_rng(0)
    state = ("grid", "agent_pos", "agent_dir", "mission_index", "target", "target_pos",
             "red_door", "blue_door")
    for _ in range(20):
        actions = rng.integers(0, 7, size=32)
        (seen, *ends, info), (masked_seen, *masked_ends, masked_info) = (indexed.step(actions),
                                                                         masked.step(actions))
        assert isinstance(seen, dict) and isinstance(masked_seen, dict)
        assert all(torch.equal(seen[key], masked_seen[key]) for key in ("image", "mission"))
        assert all(torch.equal(a, b) for a, b in zip(ends, masked_ends, strict=True))
        assert torch.equal(info["final_obs"]["mission"], masked_info["final_obs"]["mission"])
        for name in state:
            if hasattr(indexed, name):
                assert torch.equal(getattr(indexed, name), getattr(masked, name)), name

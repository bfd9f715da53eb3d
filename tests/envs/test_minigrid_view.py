"""The direct egocentric view (rlmem.envs.minigrid_view) equals MiniGrid's own gen_obs, element
for element: over random walks, and over every position, heading, door state and carried
object of a small world."""

from __future__ import annotations

import copy
import itertools
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from minigrid.core.grid import Grid
from minigrid.core.world_object import Ball, Door, Key, WorldObj
from minigrid.envs import EmptyEnv
from minigrid.minigrid_env import MiniGridEnv

from rlmem.envs import make_env, minigrid_view
from rlmem.envs.minigrid_view import egocentric_image, use_direct_view, view_offsets


def minigrid_image(env: MiniGridEnv) -> np.ndarray:
    """MiniGrid's own observation image, whatever the instance has installed."""
    return MiniGridEnv.gen_obs(env)["image"]


WALKS = [
    ("MiniGrid-DoorKey-5x5-v0", {}),
    ("MiniGrid-DoorKey-16x16-v0", {}),
    ("MiniGrid-MemoryS7-v0", {}),
    ("MiniGrid-KeyCorridorS3R3-v0", {}),
    ("MiniGrid-RedBlueDoors-6x6-v0", {}),
    ("MiniGrid-LavaGapS7-v0", {}),
    ("BabyAI-GoToLocal-v0", {}),
    ("MiniGrid-DoorKey-8x8-v0", {"see_through_walls": True}),
    ("MiniGrid-MemoryS13-v0", {"agent_view_size": 3}),
    ("MiniGrid-Empty-5x5-v0", {"agent_view_size": 11}),
]


@pytest.mark.parametrize(("env_id", "kwargs"), WALKS, ids=[f"{e}{k}" for e, k in WALKS])
def test_random_walk_views_equal_minigrids(env_id: str, kwargs: dict[str, Any]) -> None:
    env = gym.make(env_id, **kwargs)
    unwrapped = env.unwrapped
    assert isinstance(unwrapped, MiniGridEnv)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    for step in range(400):
        expected = minigrid_image(unwrapped)
        got = egocentric_image(unwrapped)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert np.array_equal(got, expected), f"{env_id} step {step}"
        # pickup, drop and toggle as often as moves: carried objects and doors change state
        _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 6)))
        if terminated or truncated:
            env.reset(seed=int(rng.integers(1 << 16)))
    env.close()


def test_every_position_heading_door_and_carried_object() -> None:
    """A 6x6 world with a door in its wall: the agent everywhere free, every heading, the door
    open, shut and locked, carrying nothing, a key or a ball; a door to see through and a ball
    beyond it, near the world's edge where the view leaves it."""
    env = EmptyEnv(size=6)
    env.reset(seed=0)
    door = Door("yellow")
    env.grid.vert_wall(3, 0)
    env.grid.set(3, 2, door)
    env.grid.set(4, 3, Ball("blue"))
    free = [(x, y) for x in range(1, 5) for y in range(1, 5) if env.grid.get(x, y) is None]
    carried_objects: tuple[WorldObj | None, ...] = (None, Key("red"), Ball("green"))
    for (x, y), heading, state, carried in itertools.product(
            free, range(4), ("open", "shut", "locked"), carried_objects):
        env.agent_pos = np.array((x, y))
        env.agent_dir = heading
        door.is_open, door.is_locked = state == "open", state == "locked"
        env.carrying = carried  # type: ignore[assignment]  # minigrid types it by its None
        assert np.array_equal(egocentric_image(env), minigrid_image(env)), \
            (x, y, heading, state, carried)


def test_view_offsets_turn_the_slice_as_minigrid_does() -> None:
    """Label each cell of a world with its own position: the view MiniGrid builds (slice, then
    direction + 1 left turns) holds at (i, j) the cell that view_offsets names."""
    size = 5
    grid = Grid(size, size)
    labels = {(x, y): Ball() for x in range(size) for y in range(size)}
    for (x, y), ball in labels.items():
        grid.set(x, y, ball)
    for direction in range(4):
        view = grid.slice(0, 0, size, size)
        for _ in range(direction + 1):
            view = view.rotate_left()
        offsets = view_offsets(size, direction)
        for i, j in itertools.product(range(size), repeat=2):
            assert view.get(i, j) is labels[offsets[i][j]]


def test_make_env_installs_it_and_observations_stay_minigrids() -> None:
    env = make_env("DoorKey-5x5")
    unwrapped = env.unwrapped
    assert isinstance(unwrapped, MiniGridEnv)
    assert "gen_obs" in vars(unwrapped)
    observation, _ = env.reset(seed=1)
    assert np.array_equal(observation["image"], minigrid_image(unwrapped))
    raw = unwrapped.gen_obs()
    assert raw.keys() == {"image", "direction", "mission"}
    assert raw["direction"] == unwrapped.agent_dir and raw["mission"] == unwrapped.mission
    # the env still pickles and copies, and the copy observes its own world
    for twin in (pickle.loads(pickle.dumps(env)), copy.deepcopy(env)):
        world = twin.unwrapped
        assert isinstance(world, MiniGridEnv) and vars(world)["gen_obs"].env is world
        twin.step(0)  # a turn: the twin's view changes, the original's does not
        assert np.array_equal(world.gen_obs()["image"], minigrid_image(world))
        assert np.array_equal(unwrapped.gen_obs()["image"], observation["image"])
    env.close()


class _OwnObservations(EmptyEnv):
    def gen_obs(self) -> dict[str, Any]:
        return super().gen_obs()


class _OwnGrid(Grid):
    pass


def test_left_alone_where_the_env_makes_its_own_observations(
        monkeypatch: pytest.MonkeyPatch) -> None:
    own = _OwnObservations(size=5)
    assert use_direct_view(own) is False
    assert "gen_obs" not in vars(own)
    plain = EmptyEnv(size=5)
    assert use_direct_view(plain) is True
    plain.reset(seed=0)
    # a world of another Grid class takes MiniGrid's path
    def refuse(env: MiniGridEnv) -> np.ndarray:
        raise AssertionError("the direct view read a grid of another class")

    monkeypatch.setattr(minigrid_view, "egocentric_image", refuse)
    other = _OwnGrid(plain.grid.width, plain.grid.height)
    other.grid = list(plain.grid.grid)
    plain.grid = other
    assert np.array_equal(plain.gen_obs()["image"], minigrid_image(plain))

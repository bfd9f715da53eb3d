"""The tensor Fetch, GoToObject, GoToDoor and RedBlueDoors step as MiniGrid's own (issue 54,
item 3, (a) and (c)), mission included.

The walks are those of ``test_tensor_minigrid_steps.py`` (:func:`tensor_minigrid_check.lockstep`):
from the same state and the same random actions, every observation (the view, with or without
the visibility mask, and the tokenised mission), reward, ``terminated`` and ``truncated`` equal
to MiniGrid's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv
from tensor_minigrid_check import lockstep

from rlmem.agents.minigrid_encoders import ImageEncoder, MissionEncoder
from rlmem.agents.ppo.observation import observation_to_tensors
from rlmem.envs import make_vector_env
from rlmem.envs.minigrid_observation import VOCABULARY
from rlmem.envs.tensor.minigrid import Fetch, GoToDoor, GoToObject, MiniGridTensorEnv

FAMILIES: dict[str, type[MiniGridTensorEnv]] = {
    "MiniGrid-Fetch-5x5-N2-v0": Fetch, "MiniGrid-Fetch-6x6-N2-v0": Fetch,
    "MiniGrid-Fetch-8x8-N3-v0": Fetch,
    "MiniGrid-GoToObject-6x6-N2-v0": GoToObject, "MiniGrid-GoToObject-8x8-N2-v0": GoToObject,
    "MiniGrid-GoToDoor-5x5-v0": GoToDoor, "MiniGrid-GoToDoor-6x6-v0": GoToDoor,
    "MiniGrid-GoToDoor-8x8-v0": GoToDoor,
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
    assert met["truncated"] > 0 and met["terminated"] > 0 and met["success"] > 0, met


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

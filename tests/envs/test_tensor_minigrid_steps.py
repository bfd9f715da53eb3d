"""The tensor MiniGrid envs step as MiniGrid's own (issue 54, (a) and (c)).

From the same state (:meth:`~rlmem.envs.tensor.minigrid.MiniGridTensorEnv.from_reference` copies
the envs of rlmem's gymnasium vector path) and the same random actions, every observation (the
encoder's input, the 7x7 view with its visibility mask), reward, ``terminated`` and
``truncated`` is equal to MiniGrid's (:func:`tensor_minigrid_check.lockstep`), and so is the
last observation of an ended episode (``final_obs``). After an auto-reset the two backends'
layouts differ draw for draw (their random streams differ; the layouts' distributions are
compared in ``test_tensor_minigrid_generation.py``), so the tensor envs are copied afresh from
the gymnasium envs' new episodes, whose first observations are compared too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv
from minigrid.minigrid_env import MiniGridEnv
from tensor_minigrid_check import lockstep

from rlmem.agents.minigrid_encoders import ImageEncoder
from rlmem.agents.ppo.observation import observation_to_tensors
from rlmem.cells._engines import compiled
from rlmem.envs import make_vector_env
from rlmem.envs.tensor.minigrid import DoorKey, Memory, MiniGridTensorEnv

DOORKEYS = ["MiniGrid-DoorKey-5x5-v0", "MiniGrid-DoorKey-6x6-v0", "MiniGrid-DoorKey-8x8-v0",
            "MiniGrid-DoorKey-16x16-v0"]
MEMORIES = ["MiniGrid-MemoryS7-v0", "MiniGrid-MemoryS9-v0", "MiniGrid-MemoryS11-v0",
            "MiniGrid-MemoryS13-v0", "MiniGrid-MemoryS13Random-v0", "MiniGrid-MemoryS17Random-v0"]
FAMILY: dict[str, type[MiniGridTensorEnv]] = {
    **dict.fromkeys(DOORKEYS, DoorKey), **dict.fromkeys(MEMORIES, Memory)}


@pytest.fixture(params=["compiled", "tensor ops"])
def step_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test once through the compiled step and view (the CPU's path,
    ``csrc/minigrid.h``), once through the tensor ops (the path off the CPU, and with
    ``RLMEM_NO_EXTENSION=1``); ``test_tensor_minigrid_compiled.py`` compares the two."""
    if request.param == "tensor ops":
        monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")


@pytest.mark.usefixtures("step_path")
def test_doorkey_5x5_steps_as_minigrid() -> None:
    """1,024 steps of DoorKey-5x5 with short episodes: keys carried, doors opened, a goal
    reached, episodes truncated, all equal."""
    met = lockstep("MiniGrid-DoorKey-5x5-v0", DoorKey, 8, 128, seed=2, max_steps=60)
    assert min(met["carrying"], met["open_door"], met["success"], met["truncated"]) > 0, met


@pytest.mark.usefixtures("step_path")
def test_memory_s7_steps_as_minigrid() -> None:
    """1,024 steps of MemoryS7 with short episodes: successes, failures, truncations."""
    met = lockstep("MiniGrid-MemoryS7-v0", Memory, 8, 128, seed=4, max_steps=30)
    assert met["success"] > 0 and met["terminated"] > met["success"] and met["truncated"] > 0, met


@pytest.mark.usefixtures("step_path")
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
    lockstep(name, FAMILY[name], 4, 24, seed=5, mission=True, direction=True, max_steps=12)


@pytest.mark.slow
@pytest.mark.parametrize("name", [*DOORKEYS, *MEMORIES])
def test_ten_thousand_steps_as_minigrid(name: str) -> None:
    """10,240 steps per env, MiniGrid's own episode lengths and a shortened one."""
    met = lockstep(name, FAMILY[name], 16, 320, seed=6)
    met += lockstep(name, FAMILY[name], 16, 320, seed=7, max_steps=40)
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

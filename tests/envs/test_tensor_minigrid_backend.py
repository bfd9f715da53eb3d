"""One way in to the tensor MiniGrid envs: ``make_vector_env(..., backend=...)``, the registry,
seeds, and the SB3 adapter (issue 54)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from gymnasium.vector import SyncVectorEnv
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.vec_env import VecMonitor

from rlmem.agents.sb3.extractor import MiniGridExtractor
from rlmem.envs import EnvOptions, make_vector_env, resolve_backend
from rlmem.envs.tensor import TensorVectorEnv
from rlmem.envs.tensor.minigrid import DoorKey, Memory
from rlmem.envs.tensor.registry import MINIGRID_OPTIONS, TENSOR_ENVS, tensor_env_name
from rlmem.envs.tensor.sb3_vec_env import TensorSB3VecEnv

MINIGRID_NAMES = [name for name, entry in TENSOR_ENVS.items()
                  if entry.options == MINIGRID_OPTIONS]


@pytest.mark.parametrize("name", MINIGRID_NAMES)
def test_every_tensor_env_has_the_gymnasium_spaces(name: str) -> None:
    """Each registered tensor env, by short name and by id, has the spaces of the env rlmem's
    gymnasium backend makes (with the mission, the direction and a smaller view too)."""
    assert tensor_env_name(TENSOR_ENVS[name].id) == name
    for fields in (False, True):
        for env_kwargs in ({}, {"agent_view_size": 5, "max_steps": 9}):
            tensor = make_vector_env(name, 2, backend="tensor", env_kwargs=env_kwargs,
                                     mission=fields, direction=fields)
            gymnasium = make_vector_env(TENSOR_ENVS[name].id, 2, env_kwargs=env_kwargs,
                                        mission=fields, direction=fields)
            assert isinstance(tensor, TensorVectorEnv) and isinstance(gymnasium, SyncVectorEnv)
            assert tensor.single_observation_space == gymnasium.single_observation_space
            assert tensor.single_action_space == gymnasium.single_action_space
            assert tensor.observation_space == gymnasium.observation_space
            gymnasium.close()


def test_auto_picks_tensor_where_it_can() -> None:
    assert resolve_backend("auto", "DoorKey-5x5") == "tensor"
    assert resolve_backend("auto", "MiniGrid-MemoryS13-v0") == "tensor"
    assert resolve_backend("auto", "CartPole-v1") == "gymnasium"
    assert resolve_backend("auto", "DoorKey-5x5", env_kwargs={"render_mode": "rgb_array"}) \
        == "gymnasium"
    assert resolve_backend("auto", "DoorKey-5x5",
                           wrappers=["gymnasium.wrappers:RecordEpisodeStatistics"]) == "gymnasium"
    assert resolve_backend("gymnasium", "DoorKey-5x5") == "gymnasium"
    assert isinstance(make_vector_env("MemoryS7", 2, backend="auto"), Memory)
    options = EnvOptions(direction=True, kwargs={"max_steps": 5})
    tensor = options.make_vector("DoorKey-8x8", 2, backend="auto")
    assert isinstance(tensor, DoorKey) and tensor.max_steps == 5
    assert tensor.single_observation_space == options.make_vector("DoorKey-8x8", 2) \
        .single_observation_space


def test_tensor_refuses_what_it_cannot_run() -> None:
    """One paragraph naming the envs that have a tensor version; options it cannot honour."""
    with pytest.raises(ValueError, match=r"no tensor version.*DoorKey-5x5.*MemoryS7"):
        make_vector_env("CartPole-v1", 2, backend="tensor")
    with pytest.raises(ValueError, match="render_mode"):
        make_vector_env("DoorKey-5x5", 2, backend="tensor", env_kwargs={"render_mode": "human"})
    with pytest.raises(ValueError, match="wrappers"):
        make_vector_env("DoorKey-5x5", 2, backend="tensor",
                        wrappers=["gymnasium.wrappers:RecordEpisodeStatistics"])
    with pytest.raises(ValueError, match="backend='tensorr'"):
        make_vector_env("DoorKey-5x5", 2, backend="tensorr")


def layouts(env: DoorKey) -> torch.Tensor:
    return torch.cat((env.grid.flatten(1), env.agent_pos, env.agent_dir[:, None]), dim=1)


def test_seeds_are_per_env() -> None:
    """Env i of ``reset(seed=s)`` lays out the same episodes whatever the batch, and an
    auto-reset continues its own stream; reset without a seed draws fresh ones."""
    small, large = DoorKey(3, size=6, max_steps=2), DoorKey(8, size=6, max_steps=2)
    small.reset(seed=40)
    large.reset(seed=[40, 41, 42, 7, 7, 7, 7, 7])
    assert torch.equal(layouts(small), layouts(large)[:3])
    assert torch.equal(layouts(large)[3], layouts(large)[4])  # seed 7 twice
    for _ in range(4):  # every second step ends every episode
        small.step(np.full(3, 6))
        large.step(np.full(8, 6))
        assert torch.equal(layouts(small), layouts(large)[:3])
    first = layouts(small)
    small.reset(seed=40)
    assert not torch.equal(layouts(small), first)  # episode 0 again, not episode 2
    unseeded = DoorKey(64, size=8)
    unseeded.reset()
    drawn = layouts(unseeded)
    unseeded.reset()
    assert not torch.equal(layouts(unseeded), drawn)


def test_sb3_recurrent_ppo_trains_on_a_tensor_env() -> None:
    """sb3-contrib's RecurrentPPO runs two updates on the SB3 adapter of a tensor env, and the
    adapter reports ends as SB3's DummyVecEnv does."""
    envs = TensorSB3VecEnv(Memory(4, size=7, max_steps=6))
    envs.seed(3)
    observation = envs.reset()
    assert isinstance(observation, dict) and observation["image"].shape == (4, 7, 7, 3)
    for _ in range(6):  # the sixth step reaches max_steps
        envs.step_async(np.zeros(4, dtype=np.int64))
        _, reward, done, infos = envs.step_wait()
    assert done.all() and all(info["TimeLimit.truncated"] for info in infos)
    assert infos[0]["terminal_observation"]["image"].shape == (7, 7, 3)
    assert reward.dtype == np.float32
    model = RecurrentPPO("MultiInputLstmPolicy", VecMonitor(envs), n_steps=8, batch_size=16,
                         n_epochs=1, seed=0,
                         policy_kwargs={"lstm_hidden_size": 16, "normalize_images": False,
                                        "features_extractor_class": MiniGridExtractor})
    model.learn(total_timesteps=64)
    assert model.num_timesteps == 64


@pytest.mark.parametrize("family", [lambda: DoorKey(32, size=5, max_steps=7),
                                    lambda: Memory(32, size=9, random_length=True, max_steps=5)])
def test_masked_resets_are_the_indexed_ones(family: Callable[[], DoorKey | Memory]) -> None:
    """The GPU's way of auto-resetting (every env laid out, the ended ones selected) gives the
    same envs, observations and ends as the CPU's (only the ended ones laid out), checked on
    the CPU."""
    indexed, masked = family(), family()
    masked.masked_resets = True
    rng = np.random.default_rng(0)
    first, masked_first = indexed.reset(seed=9)[0], masked.reset(seed=9)[0]
    assert isinstance(first, dict) and isinstance(masked_first, dict)
    assert torch.equal(first["image"], masked_first["image"])
    for _ in range(20):
        actions = rng.integers(0, 7, size=32)
        outputs = indexed.step(actions), masked.step(actions)
        (seen, *ends, info), (masked_seen, *masked_ends, masked_info) = outputs
        assert isinstance(seen, dict) and isinstance(masked_seen, dict)
        assert torch.equal(seen["image"], masked_seen["image"])
        assert all(torch.equal(a, b) for a, b in zip(ends, masked_ends, strict=True))
        assert torch.equal(info["final_obs"]["image"], masked_info["final_obs"]["image"])
        assert torch.equal(indexed.grid, masked.grid)
        assert torch.equal(indexed.agent_pos, masked.agent_pos)

"""The tensor egocentric view is MiniGrid's ``gen_obs()["image"]``: over random walks through
MiniGrid envs with many doors, keys and walls (beyond DoorKey and Memory), every direction,
doors open, shut and locked, objects carried, views of 3 to 11 cells (the widest by rows, the
others by the row table)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from minigrid.minigrid_env import MiniGridEnv

from rlmem.cells._engines import compiled
from rlmem.envs.tensor.minigrid.view import TABLE_VIEW, egocentric_image


def tensor_view(env: MiniGridEnv) -> np.ndarray:
    """:func:`egocentric_image` of one MiniGrid env's current state."""
    grid = np.pad(env.grid.encode(), ((0, 0), (0, 0), (0, 1)))
    carrying = (*env.carrying.encode(), 0) if env.carrying else (1, 0, 0, 0)
    image = egocentric_image(torch.as_tensor(grid)[None],
                             torch.tensor([[int(env.agent_pos[0]), int(env.agent_pos[1])]]),
                             torch.tensor([env.agent_dir]),
                             torch.tensor([carrying], dtype=torch.uint8), env.agent_view_size)
    return image[0].numpy()


@pytest.mark.parametrize("view", [3, 5, 7, TABLE_VIEW, TABLE_VIEW + 2])
@pytest.mark.parametrize("env_id", ["MiniGrid-MultiRoom-N6-v0", "MiniGrid-LockedRoom-v0",
                                    "MiniGrid-KeyCorridorS6R3-v0", "MiniGrid-DoorKey-8x8-v0",
                                    "MiniGrid-MemoryS13-v0"])
@pytest.mark.parametrize("path", ["compiled", "tensor ops"])
def test_view_is_minigrids(env_id: str, view: int, path: str,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the compiled view (the CPU's path, ``csrc/minigrid.h``) and through the tensor
    ops (the path off the CPU)."""
    if path == "tensor ops":
        monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
    env = gym.make(env_id, agent_view_size=view).unwrapped
    assert isinstance(env, MiniGridEnv)
    rng = np.random.default_rng(view)
    env.reset(seed=view)
    for step in range(150 if view <= TABLE_VIEW else 50):
        _, _, terminated, truncated, _ = env.step(int(rng.choice(7, p=[.2, .2, .3, .1, .05,
                                                                    .1, .05])))
        if terminated or truncated:
            env.reset(seed=step)
        expected = MiniGridEnv.gen_obs(env)["image"]
        assert np.array_equal(tensor_view(env), expected), f"{env_id}, step {step}"

"""The tensor MiniGrid envs lay out their episodes as MiniGrid does, in distribution (issue 54,
(b)).

The tensor envs draw from counter-based streams (:mod:`rlmem.envs.tensor.random`), MiniGrid
from NumPy's, so their layouts agree in distribution only. For each env, the layouts of many
episodes of both are reduced to features (positions, directions, objects, colours and states,
the walls) and each feature, and some pairs of features, is compared by a chi-square test of
homogeneity (:func:`tensor_minigrid_check.p_values`); every p-value must pass a
Bonferroni-corrected level :data:`tensor_minigrid_check.ALPHA`. The tensor
side is sampled twice: first episodes of distinct seeds (``reset``), and later episodes of the
same seeds (auto-resets, every step ending at ``max_steps=1``). A deliberately biased generator
(the negative control) must fail the same test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
import torch
from minigrid.minigrid_env import MiniGridEnv
from tensor_minigrid_check import ALPHA, Features, p_values
from torch import Tensor

from rlmem.envs.minigrid_view import use_direct_view
from rlmem.envs.tensor.minigrid import DoorKey, Memory, MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.objects import BALL, DOOR, KEY, WALL


def _positions(kind: Tensor, wanted: int) -> list[tuple[tuple[int, int], ...]]:
    """The ``(x, y)`` of every cell of kind ``wanted`` in each layout (``(N, W, H)``), in
    MiniGrid's order: where a DoorKey's key and door are, and a Memory's cue and ends."""
    height = kind.shape[2]
    found: list[list[tuple[int, int]]] = [[] for _ in range(kind.shape[0])]
    for layout, cell in (kind == wanted).flatten(1).nonzero().tolist():
        found[layout].append((cell // height, cell % height))
    return [tuple(cells) for cells in found]


def layout_features(grid: Tensor, agent_pos: Tensor, agent_dir: Tensor) -> Features:
    """What a DoorKey or Memory layout is made of.

    Shapes: ``grid`` ``(N, W, H, 3)``; ``agent_pos`` ``(N, 2)``; ``agent_dir`` ``(N,)``.
    """
    grid = grid[..., :3]  # a tensor env's cells carry a zero byte beyond MiniGrid's three
    kind = grid[..., 0]
    agent = [(x, y) for x, y in agent_pos.tolist()]
    keys = _positions(kind, KEY)
    features: Features = {
        "agent": list(agent),
        "agent_x": [x for x, _ in agent],
        "agent_dir": agent_dir.tolist(),
        "walls": [row.numpy().tobytes() for row in (kind == WALL).flatten(1)],
        "objects": [tuple(sorted(Counter(map(tuple, cells.tolist())).items()))
                    for cells in grid.flatten(1, 2)],
        "door": list(_positions(kind, DOOR)),
        "key": list(keys),
        "key_x": [tuple(x for x, _ in cells) for cells in keys],
        "ball": list(_positions(kind, BALL)),
    }
    return features


PAIRS = [("door", "agent_x"), ("door", "key_x"), ("agent", "key"), ("key", "ball"),
         ("walls", "agent_x"), ("agent", "agent_dir")]
"""Pairs whose joint distribution is compared too: the dependencies of the layouts' draws."""


def minigrid_features(env_id: str, count: int, seed: int) -> Features:
    """The layouts of ``count`` episodes of MiniGrid's own env (one seed, reset after reset)."""
    env = gym.make(env_id).unwrapped
    assert isinstance(env, MiniGridEnv)
    use_direct_view(env)  # the same observations, faster: reset makes one
    grids, positions, directions = [], [], []
    for episode in range(count):
        env.reset(seed=seed if episode == 0 else None)
        grids.append(env.grid.encode())
        positions.append(np.asarray(env.agent_pos))
        directions.append(env.agent_dir)
    env.close()
    return layout_features(torch.as_tensor(np.stack(grids)),
                           torch.as_tensor(np.stack(positions)), torch.as_tensor(directions))


def tensor_features(make: Callable[..., MiniGridTensorEnv], count: int, seed: int) -> Features:
    """The layouts of ``count`` first episodes of distinct seeds of a tensor env."""
    env = make(count)
    env.reset(seed=seed)
    return layout_features(env.grid, env.agent_pos, env.agent_dir)


def tensor_autoreset_features(make: Callable[..., MiniGridTensorEnv], count: int,
                              seed: int, num_envs: int = 250) -> Features:
    """The layouts of ``count`` later episodes of ``num_envs`` seeds of a tensor env, each
    step ending every episode (``max_steps=1``) and auto-resetting it."""
    env = make(num_envs, max_steps=1)
    env.reset(seed=seed)
    parts = []
    for _ in range(count // num_envs):
        env.step(np.full(num_envs, 6))  # done: changes nothing, and the step truncates
        parts.append((env.grid.clone(), env.agent_pos.clone(), env.agent_dir.clone()))
    grid, agent_pos, agent_dir = (torch.cat(column) for column in zip(*parts, strict=True))
    return layout_features(grid, agent_pos, agent_dir)


ENVS: dict[str, Callable[..., MiniGridTensorEnv]] = {
    "MiniGrid-DoorKey-5x5-v0": lambda n, **kw: DoorKey(n, size=5, **kw),
    "MiniGrid-DoorKey-6x6-v0": lambda n, **kw: DoorKey(n, size=6, **kw),
    "MiniGrid-DoorKey-8x8-v0": lambda n, **kw: DoorKey(n, size=8, **kw),
    "MiniGrid-DoorKey-16x16-v0": lambda n, **kw: DoorKey(n, size=16, **kw),
    "MiniGrid-MemoryS7-v0": lambda n, **kw: Memory(n, size=7, **kw),
    "MiniGrid-MemoryS9-v0": lambda n, **kw: Memory(n, size=9, **kw),
    "MiniGrid-MemoryS11-v0": lambda n, **kw: Memory(n, size=11, **kw),
    "MiniGrid-MemoryS13-v0": lambda n, **kw: Memory(n, size=13, **kw),
    "MiniGrid-MemoryS13Random-v0": lambda n, **kw: Memory(n, size=13, random_length=True, **kw),
    "MiniGrid-MemoryS17Random-v0": lambda n, **kw: Memory(n, size=17, random_length=True, **kw),
}


def failing(env_id: str, make: Callable[..., MiniGridTensorEnv], count: int
            ) -> dict[str, float]:
    """The features and pairs whose p-values fail the corrected level, for both tensor
    samples against MiniGrid's."""
    reference = minigrid_features(env_id, count, seed=1)
    found = {}
    for sample, features in (("reset", tensor_features(make, count, seed=2)),
                             ("autoreset", tensor_autoreset_features(make, count, seed=3))):
        found.update({f"{sample}: {name}": p
                      for name, p in p_values(reference, features, PAIRS).items()})
    level = ALPHA / len(found)
    return {name: p for name, p in found.items() if p < level}


FAST_COUNT = 1000
"""Layouts per sample in the default suite's tests."""


@pytest.mark.parametrize("env_id", ["MiniGrid-DoorKey-8x8-v0", "MiniGrid-MemoryS13Random-v0"])
def test_layouts_as_minigrid(env_id: str) -> None:
    """1,000 layouts per sample (the slow test takes every size)."""
    assert not failing(env_id, ENVS[env_id], FAST_COUNT)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", list(ENVS))
def test_ten_thousand_layouts_as_minigrid(env_id: str) -> None:
    """10,000 layouts per sample, every size."""
    assert not failing(env_id, ENVS[env_id], 10_000)


class KeyNearTheWall(DoorKey):
    """DoorKey whose key favours the cells after the agent in MiniGrid's order (its draw
    squared towards 1): a biased generator."""

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        draws = draws.clone()
        draws[:, 4] = draws[:, 4].sqrt()
        super()._generate(envs, draws)


class BallCueMoreOften(Memory):
    """Memory whose cue is a ball 65% of the time, not half: a biased generator."""

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        draws = draws.clone()
        draws[:, 2] = torch.where(draws[:, 2] < 0.65, 0.75, 0.25)  # >= 0.5 draws a ball
        super()._generate(envs, draws)


@pytest.mark.parametrize(("env_id", "biased"), [
    ("MiniGrid-DoorKey-8x8-v0", lambda n, **kw: KeyNearTheWall(n, size=8, **kw)),
    ("MiniGrid-MemoryS7-v0", lambda n, **kw: BallCueMoreOften(n, size=7, **kw))])
def test_a_biased_generator_fails(env_id: str, biased: Callable[..., MiniGridTensorEnv]) -> None:
    """The negative control: the same test, at the fast test's size, rejects a biased
    generator, naming the feature it skews."""
    failed = failing(env_id, biased, FAST_COUNT)
    assert any("key" in name for name in failed) if "DoorKey" in env_id else any(
        "ball" in name or "objects" in name for name in failed), failed

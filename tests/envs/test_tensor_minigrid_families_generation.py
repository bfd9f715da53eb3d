"""The tensor Fetch, GoToObject, GoToDoor and RedBlueDoors lay out their episodes as MiniGrid
does, in distribution, mission included (issue 54, item 3, (b)).

As in ``test_tensor_minigrid_generation.py`` (the same chi-square tests and level,
:func:`tensor_minigrid_check.p_values`): the layouts of many episodes of MiniGrid's own env and
of the tensor env (first episodes of distinct seeds, and auto-reset ones) are reduced to
features, and each feature and some pairs are compared; a deliberately biased generator of each
family must fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable

import gymnasium as gym
import numpy as np
import pytest
import torch
from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT
from minigrid.envs import FetchEnv
from minigrid.minigrid_env import MiniGridEnv
from tensor_minigrid_check import ALPHA, Features, p_values
from torch import Tensor

from rlmem.envs.minigrid_view import use_direct_view
from rlmem.envs.tensor.minigrid import (
    Fetch,
    GoToDoor,
    GoToObject,
    MiniGridTensorEnv,
    RedBlueDoors,
)
from rlmem.envs.tensor.minigrid.objects import EMPTY, WALL, unpacked


def layout_features(grid: Tensor, agent_pos: Tensor, agent_dir: Tensor, missions: list[str],
                    targets: list[Hashable]) -> Features:
    """What a layout of these families is made of: the agent, the walls, the objects (doors
    included: what they are, where, in which colours), the mission and the target.

    Shapes: ``grid`` ``(N, W, H, 3)``; ``agent_pos`` ``(N, 2)``; ``agent_dir`` ``(N,)``.
    """
    grid = grid[..., :3]  # a tensor env's cells carry a zero byte beyond MiniGrid's three
    kind = grid[..., 0]
    height = kind.shape[2]
    placed: list[list[tuple[int, int, str, str, int]]] = [[] for _ in range(kind.shape[0])]
    cells = grid.flatten(1, 2)
    for layout, cell in ((kind != WALL) & (kind != EMPTY)).flatten(1).nonzero().tolist():
        what, colour, state = cells[layout, cell].tolist()
        placed[layout].append((cell // height, cell % height, IDX_TO_OBJECT[what],
                               IDX_TO_COLOR[colour], state))
    return {
        "agent": [(x, y) for x, y in agent_pos.tolist()],
        "agent_dir": agent_dir.tolist(),
        "walls": [row.numpy().tobytes() for row in (kind == WALL).flatten(1)],
        "objects": [tuple(sorted(Counter(o[2:] for o in objects).items())) for objects in placed],
        "cells": [tuple(o[:2] for o in objects) for objects in placed],
        "first_cell": [objects[0][:2] for objects in placed],  # x-major order: the leftmost
        "last_cell": [objects[-1][:2] for objects in placed],
        "colours": [tuple(o[3] for o in objects) for objects in placed],
        "mission": list(missions),
        "target": list(targets),
    }


PAIRS = [("mission", "objects"), ("agent", "cells"), ("agent", "agent_dir"), ("walls", "agent"),
         ("walls", "cells"), ("target", "cells"), ("mission", "target"), ("colours", "cells")]
"""Pairs whose joint distribution is compared too: the dependencies of the layouts' draws."""


def minigrid_target(env: MiniGridEnv) -> Hashable:
    """The target of MiniGrid's own env: the cell to go to, or the (type, colour) to fetch."""
    if isinstance(env, FetchEnv):
        return env.targetType, env.targetColor
    target = getattr(env, "target_pos", None)  # GoToObject's and GoToDoor's
    return None if target is None else tuple(int(v) for v in target)


def tensor_targets(env: MiniGridTensorEnv) -> list[Hashable]:
    """:func:`minigrid_target` of every env of a tensor env."""
    if isinstance(env, Fetch):
        return [(IDX_TO_OBJECT[what], IDX_TO_COLOR[colour])
                for what, colour, _ in unpacked(env.target).tolist()]
    target = getattr(env, "target_pos", None)
    if target is not None:
        return [(x, y) for x, y in target.tolist()]
    return [None] * env.num_envs


def minigrid_features(env_id: str, count: int, seed: int) -> Features:
    """The layouts of ``count`` episodes of MiniGrid's own env (one seed, reset after reset)."""
    env = gym.make(env_id).unwrapped
    assert isinstance(env, MiniGridEnv)
    use_direct_view(env)  # the same observations, faster: reset makes one
    grids, positions, directions, missions, targets = [], [], [], [], []
    for episode in range(count):
        env.reset(seed=seed if episode == 0 else None)
        grids.append(env.grid.encode())
        positions.append(np.asarray(env.agent_pos))
        directions.append(env.agent_dir)
        missions.append(env.mission)
        targets.append(minigrid_target(env))
    env.close()
    return layout_features(torch.as_tensor(np.stack(grids)), torch.as_tensor(np.stack(positions)),
                           torch.as_tensor(directions), missions, targets)


def tensor_state(env: MiniGridTensorEnv) -> tuple[Tensor, Tensor, Tensor, list[str],
                                                    list[Hashable]]:
    """A tensor env's layouts, as :func:`layout_features` takes them."""
    return (env.grid.clone(), env.agent_pos.clone(), env.agent_dir.clone(),
            [env.missions[i] for i in env.mission_index.tolist()], tensor_targets(env))


def tensor_features(make: Callable[..., MiniGridTensorEnv], count: int, seed: int,
                    autoreset: bool) -> Features:
    """The layouts of ``count`` first episodes of distinct seeds of a tensor env, or (with
    ``autoreset``) of later episodes of 250 seeds, each step ending every episode."""
    if not autoreset:
        env = make(count)
        env.reset(seed=seed)
        return layout_features(*tensor_state(env))
    env = make(250, max_steps=1)
    env.reset(seed=seed)
    parts = []
    for _ in range(count // 250):
        env.step(np.full(250, 6))  # done: changes nothing, and the step truncates
        parts.append(tensor_state(env))
    grids, positions, directions, missions, targets = zip(*parts, strict=True)
    return layout_features(torch.cat(grids), torch.cat(positions), torch.cat(directions),
                           [m for part in missions for m in part],
                           [t for part in targets for t in part])


ENVS: dict[str, Callable[..., MiniGridTensorEnv]] = {
    "MiniGrid-Fetch-5x5-N2-v0": lambda n, **kw: Fetch(n, size=5, num_objs=2, **kw),
    "MiniGrid-Fetch-6x6-N2-v0": lambda n, **kw: Fetch(n, size=6, num_objs=2, **kw),
    "MiniGrid-Fetch-8x8-N3-v0": lambda n, **kw: Fetch(n, size=8, num_objs=3, **kw),
    "MiniGrid-GoToObject-6x6-N2-v0": lambda n, **kw: GoToObject(n, size=6, num_objs=2, **kw),
    "MiniGrid-GoToObject-8x8-N2-v0": lambda n, **kw: GoToObject(n, size=8, num_objs=2, **kw),
    "MiniGrid-GoToDoor-5x5-v0": lambda n, **kw: GoToDoor(n, size=5, **kw),
    "MiniGrid-GoToDoor-6x6-v0": lambda n, **kw: GoToDoor(n, size=6, **kw),
    "MiniGrid-GoToDoor-8x8-v0": lambda n, **kw: GoToDoor(n, size=8, **kw),
    "MiniGrid-RedBlueDoors-6x6-v0": lambda n, **kw: RedBlueDoors(n, size=6, **kw),
    "MiniGrid-RedBlueDoors-8x8-v0": lambda n, **kw: RedBlueDoors(n, size=8, **kw),
}
"""Every registered size of each family, and how to make its tensor env."""


def failing(env_id: str, make: Callable[..., MiniGridTensorEnv], count: int
            ) -> dict[str, float]:
    """The features and pairs whose p-values fail the corrected level, for both tensor
    samples against MiniGrid's."""
    reference = minigrid_features(env_id, count, seed=1)
    found = {}
    for sample, autoreset in (("reset", False), ("autoreset", True)):
        features = tensor_features(make, count, seed=2 + autoreset, autoreset=autoreset)
        found.update({f"{sample}: {name}": p
                      for name, p in p_values(reference, features, PAIRS).items()})
    level = ALPHA / len(found)
    return {name: p for name, p in found.items() if p < level}


FAST_COUNT = 1000
"""Layouts per sample in the default suite's tests (the largest size of each family); the slow
ones take 10,000 of every size."""


@pytest.mark.parametrize(("env_id", "count"), [
    *[(env_id, FAST_COUNT) for env_id in ("MiniGrid-Fetch-8x8-N3-v0",
                                          "MiniGrid-GoToObject-8x8-N2-v0",
                                          "MiniGrid-GoToDoor-8x8-v0",
                                          "MiniGrid-RedBlueDoors-8x8-v0")],
    *[pytest.param(env_id, 10_000, marks=pytest.mark.slow) for env_id in ENVS]])
def test_layouts_as_minigrid(env_id: str, count: int) -> None:
    """``count`` layouts per sample."""
    assert not failing(env_id, ENVS[env_id], count)


class MoreKeys(Fetch):
    """Fetch whose objects are keys 65% of the time, not half: a biased generator."""

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        draws = draws.clone()
        kinds = draws[:, :self.num_objs]  # each object's type draw: < 0.5 a key
        draws[:, :self.num_objs] = torch.where(kinds < 0.65, 0.25, 0.75)
        super()._generate(envs, draws)


class FewerBoxes(GoToObject):
    """GoToObject whose objects favour the first (colour, type) pairs (their draws squared
    towards 0), so boxes and the last colours come less often: a biased generator."""

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        draws = draws.clone()
        draws[:, :self.num_objs] **= 1.5  # each object's (colour, type) draw
        super()._generate(envs, draws)


class TopDoorMoreOften(GoToDoor):
    """GoToDoor whose target is the top door 40% of the time, not a quarter: a biased
    generator."""

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        draws = draws.clone()
        target = draws[:, -1]  # below 0.25: the top door
        draws[:, -1] = torch.where((target >= 0.25) & (target < 0.4), 0.1, target)
        super()._generate(envs, draws)


class RedDoorHigher(RedBlueDoors):
    """RedBlueDoors whose red door favours the top of its wall (its draw squared towards 0):
    a biased generator."""

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        draws = draws.clone()
        draws[:, 2] **= 1.5
        super()._generate(envs, draws)


BIASED: dict[str, tuple[Callable[..., MiniGridTensorEnv], str]] = {
    "MiniGrid-Fetch-8x8-N3-v0": (lambda n, **kw: MoreKeys(n, size=8, num_objs=3, **kw),
                                 "target"),
    "MiniGrid-GoToObject-8x8-N2-v0": (lambda n, **kw: FewerBoxes(n, size=8, num_objs=2, **kw),
                                      "objects"),
    "MiniGrid-GoToDoor-8x8-v0": (lambda n, **kw: TopDoorMoreOften(n, size=8, **kw), "target"),
    "MiniGrid-RedBlueDoors-8x8-v0": (lambda n, **kw: RedDoorHigher(n, size=8, **kw),
                                     "first_cell"),
}
"""Per family, a biased generator and the feature it skews."""


@pytest.mark.parametrize("env_id", list(BIASED))
def test_a_biased_generator_fails(env_id: str) -> None:
    """The negative control: the same test, at the fast test's size, rejects a biased
    generator, naming the feature it skews."""
    biased, feature = BIASED[env_id]
    failed = failing(env_id, biased, FAST_COUNT)
    assert any(feature in name for name in failed), failed

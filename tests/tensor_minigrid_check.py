"""Helpers of the tests that compare the tensor MiniGrid envs with MiniGrid's own (issue 54):
:func:`lockstep`, the walk of both backends with the same actions, every output compared (the
tests of (a) and (c)); and :func:`p_values`, the chi-square tests of two samples of layouts (the
tests of (b))."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium.vector import SyncVectorEnv

from rlmem.envs import make_vector_env
from rlmem.envs.tensor.minigrid import MiniGridTensorEnv
from rlmem.envs.tensor.minigrid.objects import DOOR, EMPTY, OPEN

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


def lockstep(name: str, family: type[MiniGridTensorEnv], num_envs: int, steps: int, seed: int,
             *, mission: bool = False, direction: bool = False, **env_kwargs: Any
             ) -> Counter[str]:
    """Step rlmem's gymnasium vector env ``name`` and its tensor copy (of ``family``) with the
    same random actions, asserting every output equal; return how often the walks met what the
    tests want met."""
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


ALPHA = 1e-3
"""The family-wise level: a sample of the right distribution fails once in a thousand."""

MIN_COUNT = 10
"""Categories seen fewer times than this in both samples together are pooled into one."""

Features = dict[str, list[Hashable]]
"""Per feature, its value in each layout."""


def chi_square_p(first: Sequence[Hashable], second: Sequence[Hashable]) -> float:
    """The p-value of the chi-square test that two samples of a categorical variable come from
    one distribution (a 2 x k contingency table, rare categories pooled)."""
    counts = [Counter(first), Counter(second)]
    categories = sorted(set(counts[0]) | set(counts[1]), key=repr)
    table = np.array([[count[c] for c in categories] for count in counts], dtype=np.float64)
    rare = table.sum(axis=0) < MIN_COUNT
    table = np.concatenate([table[:, ~rare], table[:, rare].sum(axis=1, keepdims=True)], axis=1)
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return 1.0
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0) / table.sum()
    statistic = float(((table - expected) ** 2 / expected).sum())
    degrees = table.shape[1] - 1
    return float(torch.special.gammaincc(torch.tensor(degrees / 2, dtype=torch.float64),
                                         torch.tensor(statistic / 2, dtype=torch.float64)))


def p_values(reference: Features, sample: Features, pairs: Sequence[tuple[str, str]]
             ) -> dict[str, float]:
    """The chi-square p-value of each feature and each pair of features."""
    found = {name: chi_square_p(reference[name], sample[name]) for name in reference}
    for a, b in pairs:
        found[f"{a}&{b}"] = chi_square_p(list(zip(reference[a], reference[b], strict=True)),
                                         list(zip(sample[a], sample[b], strict=True)))
    return found

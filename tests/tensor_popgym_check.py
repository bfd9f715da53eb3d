"""Checks of the tensor POPGym envs against POPGym's own (``tests/envs/test_tensor_popgym*``).

- :func:`lockstep`: the same state and the same random actions give the same observations,
  rewards, ends and final observations, across auto-resets: POPGym's envs in rlmem's gymnasium
  vector env (``SAME_STEP``), a tensor env copied from them (``from_reference``); after each
  auto-reset the tensor copy takes POPGym's new episode (``load_reference``), as the two draw
  their episodes from different random streams.
- :func:`generation_p_values`: the states right after reset, of POPGym's envs (seeds ``0 ..
  R-1``) and of a tensor env (its own seeds), compared in distribution, feature by feature.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import SyncVectorEnv
from scipy import stats  # type: ignore[import-untyped]
from torch import Tensor

from rlmem.envs import make_vector_env
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv

Fields = dict[str, np.ndarray]


def fields(observation: Any) -> Fields:
    """A batch of observations (NumPy or torch; an array, a tuple or a dict of them) as NumPy
    arrays by field, keeping their dtypes."""
    if isinstance(observation, Mapping):
        return {str(key): _numpy(value) for key, value in observation.items()}
    if isinstance(observation, tuple):
        return {str(index): _numpy(value) for index, value in enumerate(observation)}
    return {"observation": _numpy(observation)}


def _numpy(value: Any) -> np.ndarray:
    return value.cpu().numpy() if isinstance(value, Tensor) else np.asarray(value)


def assert_same_observations(expected: Any, actual: Any, rows: np.ndarray,
                             atol: float, at: str) -> None:
    """The observations of ``rows`` equal, field by field, in dtype and value (floats within
    ``atol``)."""
    want, got = fields(expected), fields(actual)
    assert want.keys() == got.keys(), at
    for key in want:
        assert want[key].dtype == got[key].dtype, f"{at}: field {key} dtype"
        np.testing.assert_allclose(got[key][rows], want[key][rows], rtol=0, atol=atol,
                                   err_msg=f"{at}: field {key}")


def row(observation: Any, index: int) -> Any:
    """Row ``index`` of a batch of observations, keeping a batch axis of one."""
    if isinstance(observation, Mapping):
        return {key: row(value, index) for key, value in observation.items()}
    if isinstance(observation, tuple):
        return tuple(row(value, index) for value in observation)
    return observation[index:index + 1]


def stacked(observations: list[Any]) -> Any:
    """Single observations (a vector env's ``final_obs``) stacked into a batch."""
    first = observations[0]
    if isinstance(first, Mapping):
        return {key: stacked([item[key] for item in observations]) for key in first}
    if isinstance(first, tuple):
        return tuple(stacked([item[index] for item in observations])
                     for index in range(len(first)))
    return np.stack([np.asarray(item) for item in observations])


@dataclass(frozen=True)
class Tolerance:
    """How close the tensor env's floats must be to POPGym's, absolutely (0: equal)."""

    observation: float = 0.0
    reward: float = 0.0


PHYSICS = Tolerance(observation=1e-6, reward=1e-11)
"""CartPole's and Pendulum's. torch's float64 sine and cosine differ from NumPy's in the last
bit for about one argument in a thousand; the rest of a step is the same operations in the same
order and dtypes. The difference stays small over an episode, but Pendulum's angle is not
wrapped, so its float64 step grows with the turns the pendulum has made, and its cost squares
the angle: measured over 32,000 steps of random torques, rewards (of size 1/200) differed by at
most 4e-13, observations (float32) not at all; CartPole's observations and rewards were equal.
An observation rounded to float32 may differ by one float32 step (below 5e-7 for CartPole's
|x| < 4.8)."""


TensorMaker = Callable[[list[gym.Env[Any, Any]]], Any]
"""Makes the tensor env (possibly wrapped) from the reference's envs."""


def lockstep(name: str, make_tensor: TensorMaker, *, num_envs: int, steps: int,
             seed: int = 0, wrappers: tuple[str, ...] = (), warmup: int = 0,
             tolerance: Tolerance = Tolerance()) -> int:
    """Step POPGym's env ``name`` (rlmem's gymnasium vector env, with ``wrappers``) and its
    tensor version side by side for ``steps`` steps of random actions, asserting that they
    agree (module docstring); return how many episodes ended. With ``warmup``, each of
    POPGym's envs first takes a random number of steps below it, so that the copies start
    mid-episode, at different points."""
    reference = make_vector_env(name, num_envs, wrappers=wrappers)
    assert isinstance(reference, SyncVectorEnv)
    try:
        observation, _ = reference.reset(seed=seed)
        if warmup:
            observation = _warm_up(reference, warmup, seed)
        tensor = make_tensor(list(reference.envs))
        every = np.arange(num_envs)
        assert_same_observations(observation, tensor.observe(), every, tolerance.observation,
                                 "reset")
        reference.action_space.seed(seed)
        ended = 0
        for step in range(steps):
            at = f"{name} step {step}"
            actions = reference.action_space.sample()
            want = reference.step(actions)
            got = tensor.step(torch.as_tensor(actions))
            ended += _assert_same_step(want, got, tolerance, at)
            done = np.flatnonzero(want[2] | want[3])
            tensor.load_reference([reference.envs[index] for index in done], done.tolist())
            assert_same_observations(want[0], tensor.observe(), every, tolerance.observation,
                                     f"{at}, new episodes copied")
        return ended
    finally:
        reference.close()


def _warm_up(reference: SyncVectorEnv, warmup: int, seed: int) -> Any:
    """Step each of ``reference``'s envs a random number of random steps below ``warmup``
    (resetting those that end); return their observations, batched."""
    rng = np.random.default_rng(seed)
    observations = []
    for index, env in enumerate(reference.envs):
        env.action_space.seed(seed + index)
        observation, _ = env.reset(seed=seed + index)
        for _ in range(int(rng.integers(warmup))):
            observation, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                observation, _ = env.reset()
        observations.append(observation)
    return stacked(observations)


def _assert_same_step(want: tuple[Any, ...], got: tuple[Any, ...], tolerance: Tolerance,
                      at: str) -> int:
    """One step's rewards, ends, ongoing observations and final observations agree; return
    how many episodes ended."""
    observation, reward, terminated, truncated, info = want
    np.testing.assert_array_equal(_numpy(got[2]), terminated, err_msg=f"{at}: terminated")
    np.testing.assert_array_equal(_numpy(got[3]), truncated, err_msg=f"{at}: truncated")
    assert _numpy(got[1]).dtype == np.float64
    np.testing.assert_allclose(_numpy(got[1]), reward, rtol=0, atol=tolerance.reward,
                               err_msg=f"{at}: reward")
    done = terminated | truncated
    assert_same_observations(observation, got[0], np.flatnonzero(~done),
                             tolerance.observation, at)
    np.testing.assert_array_equal(_numpy(got[4]["_final_obs"]), done)
    for index in np.flatnonzero(done):
        assert_same_observations(stacked([info["final_obs"][index]]), row(got[4]["final_obs"],
                                 int(index)), np.arange(1), tolerance.observation,
                                 f"{at}: final observation of env {index}")
    return int(done.sum())


# --- generation ------------------------------------------------------------------------------

Features = Callable[[PopgymTensorEnv], dict[str, np.ndarray]]
"""What is compared of a tensor env's state: named per-env features, integers (categories) or
floats (continuous values)."""


def reference_states(name: str, count: int, tensor_type: type[PopgymTensorEnv]
                     ) -> PopgymTensorEnv:
    """``count`` resets of POPGym's env ``name`` (seeds ``0 .. count-1``), copied into one
    tensor env of ``count`` copies, so that the same features can be read from both."""
    env = gym.make(f"popgym:popgym-{name}-v0")
    try:
        env.reset(seed=0)
        states = tensor_type.from_reference([env] * count)
        for seed in range(1, count):
            env.reset(seed=seed)
            states.load_reference([env], [seed])
        return states
    finally:
        env.close()


def generation_p_values(reference: PopgymTensorEnv, tensor: PopgymTensorEnv,
                        features: Features) -> dict[str, float]:
    """The p-value of each feature's two-sample test between the two envs' current states: a
    chi-squared test of homogeneity for integer features, Kolmogorov-Smirnov for floats."""
    want, got = features(reference), features(tensor)
    return {key: (_chi_squared(want[key], got[key]) if want[key].dtype.kind in "iub"
                  else float(stats.ks_2samp(want[key], got[key]).pvalue))
            for key in want}


def _chi_squared(first: np.ndarray, second: np.ndarray, least: float = 5.0) -> float:
    """Two samples of categories, the categories whose expected count in either sample is
    below ``least`` pooled into one, tested for homogeneity."""
    categories = np.union1d(first, second)
    table = np.stack([(first[:, None] == categories).sum(0),
                      (second[:, None] == categories).sum(0)]).astype(np.float64)
    expected = table.sum(0) * min(len(first), len(second)) / table.sum()
    rare = expected < least
    if rare.any():
        table = np.concatenate([table[:, ~rare], table[:, rare].sum(1, keepdims=True)], 1)
    table = table[:, table.sum(0) > 0]
    if table.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(table).pvalue)


class Biased:
    """A negative control's generator: each uniform draw ``u`` of an episode replaced by
    ``u ** (1 + tilt * k / K)`` (``k`` the draw's index of ``K``): no longer uniform, and
    differently so for each draw."""

    def __init__(self, env: PopgymTensorEnv, tilt: float) -> None:
        self.env, self.tilt = env, tilt
        self.draws = env._draws

    def __call__(self) -> Tensor:
        draws = self.draws()
        power = 1 + self.tilt * torch.linspace(0, 1, draws.shape[1], dtype=torch.float64,
                                               device=draws.device)
        return draws ** power

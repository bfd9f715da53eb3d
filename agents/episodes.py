"""Per-env episode bookkeeping of a vector env: the running return and length of each env's
current episode, shared by rollouts and evaluation."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class FinishedEpisode(NamedTuple):
    """An episode that ended at the last step."""

    env: int
    """The index of its env."""
    episode_return: float
    length: int


class EpisodeTracker:
    """The return and length so far of the current episode of each of ``num_envs`` envs."""

    def __init__(self, num_envs: int) -> None:
        self.returns = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def step(self, rewards: np.ndarray, done: np.ndarray) -> list[FinishedEpisode]:
        """Add one step's ``rewards``; return the episodes that ``done`` ends (by env index),
        whose envs then start from zero."""
        self.returns += rewards
        self.lengths += 1
        finished = [FinishedEpisode(int(index), float(self.returns[index]),
                                    int(self.lengths[index])) for index in np.flatnonzero(done)]
        self.returns[done] = 0.0
        self.lengths[done] = 0
        return finished

"""Episode statistics of a training run: the per-update columns both RL trainers write."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np

RECENT_EPISODES = 100
"""``return_recent`` is the mean return of this many most recent episodes."""

STOP_EPISODES = 1000
"""``stop_return`` is judged on the mean return of this many most recent episodes. A window of
100 stops at the first noise peak: on MemoryS7 (about 170 episodes per update) a policy that
stopped on a 100-episode mean of 0.94 evaluated at 0.82."""


class EpisodeLog:
    """The returns of the most recent :data:`STOP_EPISODES` episodes, carried across updates
    (and across a resume, through :attr:`recent`).

    Args:
        recent: returns restored from a checkpoint, oldest first.
    """

    def __init__(self, recent: Iterable[float] = ()) -> None:
        self.recent: deque[float] = deque(recent, maxlen=STOP_EPISODES)

    def columns(self, returns: Sequence[float], lengths: Sequence[float]) -> dict[str, float]:
        """Record the episodes that ended during an update; return its ``progress.csv`` columns:
        ``episodes``, ``return_mean``/``return_std``/``length_mean`` over those episodes (NaN
        when none ended) and ``return_recent`` over the last :data:`RECENT_EPISODES`."""
        self.recent.extend(returns)
        values, steps = np.asarray(returns, dtype=float), np.asarray(lengths, dtype=float)
        return {"episodes": len(values),
                "return_mean": values.mean() if len(values) else math.nan,
                "return_std": values.std() if len(values) else math.nan,
                "return_recent": self.recent_mean(),
                "length_mean": steps.mean() if len(steps) else math.nan}

    def recent_mean(self, episodes: int = RECENT_EPISODES) -> float:
        """The mean return of the last ``episodes`` episodes (NaN before the first)."""
        window = list(self.recent)[-episodes:]
        return float(np.mean(window)) if window else math.nan

    def reached(self, target: float | None) -> bool:
        """Whether the last :data:`STOP_EPISODES` episodes average at least ``target``."""
        return (target is not None and len(self.recent) == STOP_EPISODES
                and self.recent_mean(STOP_EPISODES) >= target)

"""Aggregate statistics of runs over seeds, as Agarwal et al. (2021) recommend.

"Deep Reinforcement Learning at the Edge of the Statistical Precipice" (NeurIPS 2021) shows that
a mean ± standard deviation over three seeds cannot rank algorithms, and recommends, for a
score matrix of ``runs × tasks``:

- the **interquartile mean** (IQM): the mean of the middle 50% of all run-task scores, robust to
  an outlying run yet using half of them, unlike the median;
- **95% stratified bootstrap confidence intervals**: resample the runs *within* each task, with
  replacement, recompute the statistic, and take the 2.5th and 97.5th percentiles;
- the **probability of improvement** P(X > Y) of one algorithm over another: on each task, the
  probability that a random run of X scores above a random run of Y (ties count one half, as
  in the Mann-Whitney U statistic), averaged over tasks, with its bootstrap interval.

The computations follow their ``rliable`` package (``metrics.aggregate_iqm``,
``library.get_interval_estimates`` with its percentile interval,
``metrics.probability_of_improvement``), written here with numpy alone, since rliable pulls in
pandas, scipy, statsmodels, arch and seaborn for these few lines. ``tests/test_stats.py`` checks
them against values worked out by hand and against rliable's when it is installed.

Shapes:
    - scores: ``(runs, tasks)``; a 1-D array is one task's runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

Statistic = Callable[[NDArray[np.float64]], float]
"""A statistic of a ``(runs, tasks)`` score matrix."""

DEFAULT_REPS = 2000
"""Bootstrap resamples: enough for the third digit of a 95% interval of a few dozen runs."""


def as_matrix(scores: ArrayLike) -> NDArray[np.float64]:
    """``scores`` as a float ``(runs, tasks)`` matrix.

    Raises:
        ValueError: not 1-D or 2-D, empty, or not finite.
    """
    matrix = np.asarray(scores, dtype=np.float64)
    if matrix.ndim == 1:
        matrix = matrix[:, None]
    if matrix.ndim != 2 or matrix.size == 0:
        raise ValueError(f"scores must be a non-empty (runs, tasks) matrix, got shape "
                         f"{matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("scores must be finite: a diverged run is a score (its last "
                         "evaluation, or the task's minimum), not NaN")
    return matrix


def iqm(scores: ArrayLike) -> float:
    """The interquartile mean of every run-task score: the mean after removing the lowest and
    the highest quarter (``floor(n / 4)`` scores each, as ``scipy.stats.trim_mean(x, 0.25)``)."""
    values = np.sort(as_matrix(scores), axis=None)
    cut = int(0.25 * values.size)
    return float(values[cut:values.size - cut].mean())


def mean(scores: ArrayLike) -> float:
    """The mean of every run-task score."""
    return float(as_matrix(scores).mean())


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its bootstrap confidence interval."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def _resampled(matrix: NDArray[np.float64], generator: np.random.Generator
               ) -> NDArray[np.float64]:
    """The runs of each task drawn with replacement, each task on its own (stratified)."""
    runs, tasks = matrix.shape
    rows = generator.integers(0, runs, size=(runs, tasks))
    return np.take_along_axis(matrix, rows, axis=0)


def bootstrap(statistic: Statistic, scores: ArrayLike, *, reps: int = DEFAULT_REPS,
              confidence: float = 0.95, seed: int = 0) -> Estimate:
    """``statistic`` of ``scores`` with its stratified bootstrap percentile interval."""
    matrix = as_matrix(scores)
    generator = np.random.default_rng(seed)
    draws = [statistic(_resampled(matrix, generator)) for _ in range(reps)]
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Estimate(statistic(matrix), float(low), float(high))


def probability_of_improvement(x: ArrayLike, y: ArrayLike) -> float:
    """P(X > Y): on each task, the fraction of (run of X, run of Y) pairs where X scores higher,
    ties counting one half; the mean over tasks. X and Y may have different numbers of runs.

    Raises:
        ValueError: X and Y have different numbers of tasks.
    """
    a, b = as_matrix(x), as_matrix(y)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"X has {a.shape[1]} tasks and Y {b.shape[1]}; compare them on the "
                         "same tasks")
    greater = (a[:, None, :] > b[None, :, :]).mean(axis=(0, 1))
    ties = (a[:, None, :] == b[None, :, :]).mean(axis=(0, 1))
    return float((greater + 0.5 * ties).mean())


def probability_of_improvement_estimate(x: ArrayLike, y: ArrayLike, *,
                                        reps: int = DEFAULT_REPS, confidence: float = 0.95,
                                        seed: int = 0) -> Estimate:
    """:func:`probability_of_improvement` with its stratified bootstrap interval, the runs of
    X and of Y resampled independently within each task."""
    a, b = as_matrix(x), as_matrix(y)
    generator = np.random.default_rng(seed)
    draws = [probability_of_improvement(_resampled(a, generator), _resampled(b, generator))
             for _ in range(reps)]
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return Estimate(probability_of_improvement(a, b), float(low), float(high))


def count_meeting(scores: ArrayLike, threshold: float) -> tuple[int, int]:
    """``(k, n)``: how many of the ``n`` runs reach ``threshold`` on every task ("k of n
    seeds")."""
    matrix = as_matrix(scores)
    return int((matrix >= threshold).all(axis=1).sum()), matrix.shape[0]

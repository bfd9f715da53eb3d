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
  in the Mann-Whitney U statistic), averaged over tasks, with its bootstrap interval;
- the **performance profile** (score distribution): for each threshold τ, the fraction of
  run-task scores above τ, with its pointwise bootstrap interval.

The computations follow their ``rliable`` package (``metrics.aggregate_iqm``,
``library.get_interval_estimates`` with its percentile interval,
``metrics.probability_of_improvement``, ``library.create_performance_profile``), written here
with numpy alone, since rliable pulls in pandas, scipy, statsmodels, arch and seaborn for these
few lines. ``tests/test_stats.py`` (and ``tests/test_compare.py``, the profile) checks
them against values worked out by hand and against rliable's when it is installed (the
``rliable`` extra, which CI installs): the same point values, and intervals within their Monte
Carlo error.

To compare run folders, use ``python -m rlmem.compare`` (:mod:`rlmem.compare`), which reads
them and prints these statistics; ``python -m rlmem.stats`` only says so.

Shapes:
    - scores: ``(runs, tasks)``; a 1-D array is one task's runs.
    - taus: ``(thresholds,)``; a profile's values and bounds are ``(thresholds,)`` too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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


def _resamples(matrix: NDArray[np.float64], reps: int, generator: np.random.Generator
               ) -> NDArray[np.float64]:
    """``(reps, runs, tasks)``: ``reps`` stratified resamples of ``matrix``, the runs of each
    task drawn with replacement, each task on its own; drawn in one call, so that a few
    thousand of them cost milliseconds (the aggregators make hundreds of intervals)."""
    runs, tasks = matrix.shape
    rows = generator.integers(0, runs, size=(reps, runs, tasks))
    return np.take_along_axis(matrix[None], rows, axis=1)


def bootstrap(statistic: Statistic, scores: ArrayLike, *, reps: int = DEFAULT_REPS,
              confidence: float = 0.95, seed: int = 0) -> Estimate:
    """``statistic`` of ``scores`` with its stratified bootstrap percentile interval."""
    matrix = as_matrix(scores)
    generator = np.random.default_rng(seed)
    draws = [statistic(resample) for resample in _resamples(matrix, reps, generator)]
    return Estimate(statistic(matrix), *_interval(draws, confidence))


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
    X and of Y resampled independently within each task.

    The resamples are scored all at once: the same interval as scoring each with
    :func:`probability_of_improvement`, in a fraction of the time."""
    a, b = as_matrix(x), as_matrix(y)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"X has {a.shape[1]} tasks and Y {b.shape[1]}; compare them on the "
                         "same tasks")
    generator = np.random.default_rng(seed)
    first = _resamples(a, reps, generator)[:, :, None, :]
    second = _resamples(b, reps, generator)[:, None, :, :]
    draws = ((first > second).mean(axis=(1, 2))
             + 0.5 * (first == second).mean(axis=(1, 2))).mean(axis=1)
    return Estimate(probability_of_improvement(a, b), *_interval(draws, confidence))


def iqm_estimate(scores: ArrayLike, *, reps: int = DEFAULT_REPS, confidence: float = 0.95,
                 seed: int = 0) -> Estimate:
    """``bootstrap(iqm, scores, ...)``, the same numbers, with the resamples' IQMs taken all
    at once."""
    matrix = as_matrix(scores)
    generator = np.random.default_rng(seed)
    drawn = _resamples(matrix, reps, generator)
    values = np.sort(drawn.reshape(reps, -1), axis=1)
    cut = int(0.25 * values.shape[1])
    draws = values[:, cut:values.shape[1] - cut].mean(axis=1)
    return Estimate(iqm(matrix), *_interval(draws, confidence))


def _interval(draws: Sequence[float] | NDArray[np.float64], confidence: float
              ) -> tuple[float, float]:
    """The percentile interval of bootstrap ``draws`` at ``confidence``."""
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(draws, [tail, 100 - tail])
    return float(low), float(high)


def count_meeting(scores: ArrayLike, threshold: float) -> tuple[int, int]:
    """``(k, n)``: how many of the ``n`` runs reach ``threshold`` on every task ("k of n
    seeds")."""
    matrix = as_matrix(scores)
    return int((matrix >= threshold).all(axis=1).sum()), matrix.shape[0]


def score_distribution(scores: ArrayLike, taus: ArrayLike) -> NDArray[np.float64]:
    """``(thresholds,)``: for each τ of ``taus``, the fraction of run-task scores above it
    (strictly, as rliable's ``run_score_deviation``)."""
    matrix = as_matrix(scores)
    thresholds = np.asarray(taus, dtype=np.float64)
    return (matrix.reshape(-1)[None, :] > thresholds[:, None]).mean(axis=1)


@dataclass(frozen=True)
class Profile:
    """A performance profile: :func:`score_distribution` at ``taus`` with its pointwise
    bootstrap interval."""

    taus: NDArray[np.float64]
    value: NDArray[np.float64]
    low: NDArray[np.float64]
    high: NDArray[np.float64]


def score_distribution_estimate(scores: ArrayLike, taus: ArrayLike, *,
                                reps: int = DEFAULT_REPS, confidence: float = 0.95,
                                seed: int = 0) -> Profile:
    """:func:`score_distribution` with each τ's stratified bootstrap percentile interval
    (rliable's ``create_performance_profile`` with its defaults)."""
    matrix = as_matrix(scores)
    thresholds = np.asarray(taus, dtype=np.float64)
    generator = np.random.default_rng(seed)
    drawn = _resamples(matrix, reps, generator).reshape(reps, -1)
    draws = (drawn[:, None, :] > thresholds[None, :, None]).mean(axis=2)  # (reps, taus)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(draws, [tail, 100 - tail], axis=0)
    return Profile(thresholds, score_distribution(matrix, thresholds), low, high)

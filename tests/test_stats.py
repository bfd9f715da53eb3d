"""rlmem.stats against values worked out by hand, and against rliable where it is installed."""

from __future__ import annotations

import numpy as np
import pytest

from rlmem.stats import (
    Estimate,
    bootstrap,
    count_meeting,
    iqm,
    iqm_estimate,
    mean,
    probability_of_improvement,
    probability_of_improvement_estimate,
)


def test_iqm_drops_a_quarter_at_each_end() -> None:
    assert iqm([5.0, 1.0, 100.0, 3.0, 4.0]) == pytest.approx((3 + 4 + 5) / 3)  # cuts 1 each end
    assert iqm(np.arange(8.0)) == pytest.approx((2 + 3 + 4 + 5) / 4)
    assert iqm([[1.0, 10.0], [2.0, 20.0]]) == pytest.approx((2 + 10) / 2)  # over all scores
    assert iqm([7.0]) == 7.0


def test_probability_of_improvement_counts_ties_as_half() -> None:
    assert probability_of_improvement([2.0, 3.0], [1.0, 2.0]) == pytest.approx(
        (1 + 1 + 0.5 + 1) / 4)
    assert probability_of_improvement([1.0, 2.0], [1.0, 2.0]) == 0.5
    assert probability_of_improvement([[1.0, 9.0]], [[0.0, 9.5]]) == pytest.approx((1 + 0) / 2)
    with pytest.raises(ValueError, match="same tasks"):
        probability_of_improvement([[1.0, 2.0]], [[1.0]])


def test_the_bootstrap_interval_holds_the_estimate_and_is_reproducible() -> None:
    scores = np.random.default_rng(0).normal(size=(10, 3))
    first = bootstrap(iqm, scores, reps=500, seed=3)
    assert first.low <= first.value <= first.high
    assert first == bootstrap(iqm, scores, reps=500, seed=3)
    constant = bootstrap(mean, np.ones((5, 2)), reps=50)
    assert constant == Estimate(1.0, 1.0, 1.0)
    better = probability_of_improvement_estimate(scores + 10, scores, reps=200)
    assert better == Estimate(1.0, 1.0, 1.0)


def test_the_bootstrap_resamples_within_tasks() -> None:
    """Task 0 always scores 0 and task 1 always 1: a stratified resample keeps one of each in
    every row, so the mean never moves; a pooled one would."""
    scores = np.array([[0.0, 1.0]] * 4)
    assert bootstrap(mean, scores, reps=200) == Estimate(0.5, 0.5, 0.5)


def test_k_of_n_and_bad_input() -> None:
    assert count_meeting([[0.99, 0.995], [0.98, 1.0], [1.0, 1.0]], 0.99) == (2, 3)
    with pytest.raises(ValueError, match="finite"):
        iqm([1.0, float("nan")])
    with pytest.raises(ValueError, match="non-empty"):
        iqm([])


# rliable 1.2 passes its random_state on to arch, which warns that the keyword will go.
@pytest.mark.filterwarnings("ignore:random_state is deprecated:FutureWarning")
def test_agrees_with_rliable() -> None:
    """The point values equal rliable's. The intervals agree within the Monte Carlo error of two
    bootstraps that draw different resamples: over our seeds 0-2, within 0.003 of rliable's IQM
    interval at 10,000 draws, and within one step (1/40) of its probability of improvement's at
    5,000 (``python benchmarks/stats_vs_rliable.py``). rliable scores each resample of the
    probability of improvement in Python (about 1 ms a draw there), so that one is checked at
    2,000 draws on a smaller matrix."""
    metrics = pytest.importorskip("rliable.metrics")
    library = pytest.importorskip("rliable.library")
    scores = np.random.default_rng(1).uniform(size=(7, 4))
    other = np.random.default_rng(2).uniform(size=(5, 4))
    assert iqm(scores) == pytest.approx(metrics.aggregate_iqm(scores))
    assert probability_of_improvement(scores, other) == pytest.approx(
        metrics.probability_of_improvement(scores, other))
    _, theirs = library.get_interval_estimates(
        {"x": scores}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=10_000,
        random_state=np.random.RandomState(0))
    ours = iqm_estimate(scores, reps=10_000)
    assert (ours.low, ours.high) == pytest.approx(tuple(theirs["x"].ravel()), abs=0.02)
    x, y = scores[:5, :2], other[:4, :2]
    _, theirs = library.get_interval_estimates(
        {"xy": [x, y]}, metrics.probability_of_improvement, reps=2_000,
        random_state=np.random.RandomState(0))
    estimate = probability_of_improvement_estimate(x, y, reps=2_000)
    assert (estimate.low, estimate.high) == pytest.approx(tuple(theirs["xy"].ravel()), abs=0.05)


def test_the_fast_estimates_are_the_bootstrap_of_the_plain_statistics() -> None:
    """iqm_estimate is bootstrap(iqm) and the probability of improvement's interval is that of
    its resamples scored one by one: the same draws, scored all at once."""
    scores = np.random.default_rng(4).uniform(size=(6, 2))
    other = np.random.default_rng(5).uniform(size=(4, 2))
    assert iqm_estimate(scores, reps=300, seed=7) == bootstrap(iqm, scores, reps=300, seed=7)
    generator = np.random.default_rng(7)  # the draws in the order the estimate makes them
    rows_x = generator.integers(0, 6, size=(300, 6, 2))
    rows_y = generator.integers(0, 4, size=(300, 4, 2))
    draws = [probability_of_improvement(np.take_along_axis(scores, a, axis=0),
                                        np.take_along_axis(other, b, axis=0))
             for a, b in zip(rows_x, rows_y, strict=True)]
    low, high = np.percentile(draws, [2.5, 97.5])
    assert probability_of_improvement_estimate(scores, other, reps=300, seed=7) == Estimate(
        probability_of_improvement(scores, other), float(low), float(high))

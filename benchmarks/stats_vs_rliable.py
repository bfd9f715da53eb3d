"""How far ``rlmem.stats``'s bootstrap intervals fall from rliable's, and what rliable's cost.

    python benchmarks/stats_vs_rliable.py [--seeds 0 1 2] [--iqm-reps 10000] [--poi-reps 5000]

The point values are equal (``tests/test_stats.py``). The intervals cannot be: the two draw
different resamples, so their endpoints differ by the bootstrap's Monte Carlo error. This
prints, for each of our seeds against rliable at its ``random_state=0``, the largest
difference of an endpoint of the IQM interval (a 7 × 4 matrix) and of the probability of
improvement's (5 × 2 against 4 × 2), which sets the tolerances of ``test_agrees_with_rliable``,
and rliable's seconds per probability-of-improvement draw (it scores each resample in Python),
which sets the draws that test can afford. Needs the ``rliable`` extra.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from rliable import library, metrics

from rlmem.stats import iqm_estimate, probability_of_improvement_estimate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="seeds of our bootstrap")
    parser.add_argument("--iqm-reps", type=int, default=10_000)
    parser.add_argument("--poi-reps", type=int, default=5_000)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", "random_state is deprecated", FutureWarning)
    scores = np.random.default_rng(1).uniform(size=(7, 4))
    other = np.random.default_rng(2).uniform(size=(5, 4))
    x, y = scores[:5, :2], other[:4, :2]
    _, theirs = library.get_interval_estimates(
        {"x": scores}, lambda s: np.array([metrics.aggregate_iqm(s)]), reps=args.iqm_reps,
        random_state=np.random.RandomState(0))
    iqm_theirs = theirs["x"].ravel()
    start = time.perf_counter()
    _, theirs = library.get_interval_estimates(
        {"xy": [x, y]}, metrics.probability_of_improvement, reps=args.poi_reps,
        random_state=np.random.RandomState(0))
    per_draw = (time.perf_counter() - start) / args.poi_reps
    poi_theirs = theirs["xy"].ravel()
    print(f"rliable: IQM interval {iqm_theirs.round(4)} ({args.iqm_reps} draws), "
          f"P(X > Y) interval {poi_theirs.round(4)} ({args.poi_reps} draws, "
          f"{1e3 * per_draw:.2f} ms a draw)")
    print("| our seed | IQM: largest endpoint difference | P(X > Y): largest endpoint "
          "difference |\n|---:|---:|---:|")
    for seed in args.seeds:
        ours = iqm_estimate(scores, reps=args.iqm_reps, seed=seed)
        poi = probability_of_improvement_estimate(x, y, reps=args.poi_reps, seed=seed)
        iqm_gap = np.abs(np.array([ours.low, ours.high]) - iqm_theirs).max()
        poi_gap = np.abs(np.array([poi.low, poi.high]) - poi_theirs).max()
        print(f"| {seed} | {iqm_gap:.4f} | {poi_gap:.4f} |")


if __name__ == "__main__":
    main()

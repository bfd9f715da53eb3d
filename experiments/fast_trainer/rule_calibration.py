"""How often does this folder's learning rule fail where the two arms learn alike?

    python -m experiments.fast_trainer.rule_calibration             # print
    python -m experiments.fast_trainer.rule_calibration --write     # into RULE_CALIBRATION.md

The rule of the learning checks here (:mod:`~experiments.fast_trainer.learning` and the
comparisons built on it): a new arm learns as the old one did if every one of the six
P(new ≥ old) intervals (three measures on DoorKey-5x5 and on MemoryS7, 5 seeds an arm, 95%
stratified bootstrap, :mod:`rlmem.stats`) contains ½ or lies above it. Each check was decided by
that rule, written before its runs; this module measures the rule itself, after the fact, and
decides nothing. Two measurements:

1. **One interval, distribution-free.** Where the runs of both arms are drawn from one
   continuous distribution, P and its bootstrap interval depend only on the runs' ranks, and
   the C(10, 5) = 252 ways the ranks fall between the arms are equally likely: the share of
   them whose interval lies below ½ is the rule's false-failure rate for one interval, exactly,
   at the bootstrap seed the comparisons use (0); and its mean over :data:`BOOTSTRAP_SEEDS`
   (it moves with the resamples drawn, many patterns lying at the interval's edge).
2. **All six, on each comparison's own runs.** Under the null that a seed's two runs are
   exchangeable (both drawn alike: the arms learn alike), each of the 2⁵ relabelings of an env
   (swapping the arms of any set of seeds; the same swap in an env's three measures, which are
   the same runs') is as likely as the one observed; DoorKey-5x5 and MemoryS7 are separate runs,
   relabeled independently (32 × 32 relabelings). The share on which the rule fails is its
   false-failure rate on runs like these; the share whose lowest upper bound of the six
   intervals is at or below the observed one is the observed result's permutation p-value. The
   same with the runs exchangeable across seeds too (C(10, 5) = 252 splits an env), the
   unpaired design the bootstrap interval assumes.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from experiments.common.arm_runs import Arm
from experiments.fast_trainer.compiled_lstm import COMPILED
from experiments.fast_trainer.folded_grid import FOLDED
from experiments.fast_trainer.fused_adam_learning import FOREACH, FUSED
from experiments.fast_trainer.learning import CASES, FAST, HERE, RUNS, SEEDS, arms, measures
from experiments.tensor_backend import compare as tensor_backend
from rlmem.stats import probability_of_improvement_estimate

RESULTS = HERE / "RULE_CALIBRATION.md"
BOOTSTRAP_SEEDS = range(20)
"""The bootstrap seeds over which the one-interval rate is averaged as well."""
HALF = 0.5


@dataclass(frozen=True)
class Comparison:
    """One learning check of this folder: its page, the old and the new arm."""

    page: str
    old: Arm
    new: Arm


COMPARISONS = (
    Comparison("RESULTS.md", arms(tensor_backend.RUNS)[0], FAST),
    Comparison("FOLDED_GRID.md", FAST, FOLDED),
    Comparison("COMPILED_LSTM.md", FOLDED, COMPILED),
    Comparison("FUSED_ADAM_LEARNING.md", FOREACH, FUSED),
)


def upper_bound(new: ArrayLike, old: ArrayLike, seed: int = 0) -> float:
    """The upper end of P(new ≥ old)'s interval, as the comparisons compute it (bootstrap
    ``seed`` 0)."""
    return probability_of_improvement_estimate(new, old, seed=seed).high


def one_interval_rate(seed: int = 0, runs: int = len(SEEDS)) -> float:
    """The share of the rank patterns of two arms of ``runs`` runs whose P interval, at the
    bootstrap ``seed``, lies below ½ (measurement 1 of the module docstring)."""
    ranks = np.arange(2 * runs, dtype=np.float64)
    patterns = relabelings(paired=False, seeds=runs)
    return sum(upper_bound(ranks[chosen], np.delete(ranks, chosen), seed) < HALF
               for chosen in patterns) / len(patterns)


def relabelings(paired: bool, seeds: int = len(SEEDS)) -> list[np.ndarray]:
    """Which of an env's ``2 · seeds`` runs (the old arm's first) each relabeling calls new:
    swaps within seeds (``paired``) or every split into two halves."""
    if paired:
        return [np.array([seed + seeds * (not swapped) for seed, swapped in enumerate(swaps)])
                for swaps in itertools.product((False, True), repeat=seeds)]
    return [np.array(chosen) for chosen in itertools.combinations(range(2 * seeds), seeds)]


def lowest_upper_bounds(values: dict[str, dict[str, list[float | None]]], old: str, new: str,
                        paired: bool) -> tuple[float, np.ndarray]:
    """An env's lowest upper bound over its three measures, observed and under every
    relabeling (in :func:`relabelings` order) of its seeds (each measure's runs per arm)."""
    pooled = []
    for by_arm in values.values():
        runs = [*by_arm[old], *by_arm[new]]
        if any(value is None for value in runs):
            raise ValueError("a run of the comparison is missing: run its module first")
        pooled.append(np.asarray(runs, dtype=np.float64))
    seeds = len(pooled[0]) // 2
    bounds = []
    for chosen in relabelings(paired, seeds):
        bounds.append(min(upper_bound(runs[chosen], np.delete(runs, chosen)) for runs in pooled))
    observed = min(upper_bound(runs[seeds:], runs[:seeds]) for runs in pooled)
    return observed, np.asarray(bounds)


def env_values(comparison: Comparison, seeds: Sequence[int] = SEEDS
               ) -> list[dict[str, dict[str, list[float | None]]]]:
    """Each env's three measures of ``comparison``'s runs at ``seeds`` (:func:`measures`),
    read once."""
    return [measures(RUNS, comparison.old, comparison.new, case, case.frames, seeds)
            for case in CASES]


def calibration(comparison: Comparison, values: list[dict[str, dict[str, list[float | None]]]],
                paired: bool) -> tuple[float, float, float]:
    """``(observed lowest upper bound, false-failure rate, p-value)`` of ``comparison`` over
    both envs' ``values`` (:func:`env_values`; measurement 2 of the module docstring)."""
    observed, under_null = [], []
    for by_measure in values:
        low, bounds = lowest_upper_bounds(by_measure, comparison.old.name, comparison.new.name,
                                          paired)
        observed.append(low)
        under_null.append(bounds)
    lowest = min(observed)
    passing = np.prod([(bounds >= HALF).mean() for bounds in under_null])
    above = np.prod([(bounds > lowest).mean() for bounds in under_null])
    return lowest, float(1 - passing), float(1 - above)


def page(rate: float, mean_rate: float, rows: Sequence[str]) -> str:
    """``RULE_CALIBRATION.md``."""
    return "\n".join([
        "# The learning rule's false failures (issue 59)", "",
        "Written by `python -m experiments.fast_trainer.rule_calibration --write`; what each "
        "number is: the docstring of `experiments/fast_trainer/rule_calibration.py`. "
        "Nothing here changes a decision: each check was decided by the rule written before "
        "its runs.", "",
        f"One interval, two arms of {len(SEEDS)} runs drawn alike: P's 95% interval lies below "
        f"½ in {rate:.3f} of the equally likely rank patterns at the comparisons' bootstrap "
        f"seed, {mean_rate:.3f} on average over bootstrap seeds {BOOTSTRAP_SEEDS.start}-"
        f"{BOOTSTRAP_SEEDS.stop - 1}.", "",
        "All six intervals, on each check's own runs relabeled (lowest upper bound: of the six "
        "observed intervals, below ½ where the rule failed):", "",
        "| check | lowest upper bound | false failures, paired (32 × 32) | p, paired "
        "| false failures, unpaired (252 × 252) | p, unpaired |",
        "|---|---:|---:|---:|---:|---:|",
        *rows, ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name} as well")
    args = parser.parse_args(argv)
    rate = one_interval_rate()
    mean_rate = float(np.mean([one_interval_rate(seed) for seed in BOOTSTRAP_SEEDS]))
    rows = []
    for comparison in COMPARISONS:
        values = env_values(comparison)
        lowest, paired_rate, paired_p = calibration(comparison, values, paired=True)
        _, unpaired_rate, unpaired_p = calibration(comparison, values, paired=False)
        rows.append(f"| [{comparison.new.name} against {comparison.old.name}]"
                    f"({comparison.page}) | {lowest:.2f} | {paired_rate:.3f} | {paired_p:.3f} "
                    f"| {unpaired_rate:.3f} | {unpaired_p:.3f} |")
    text = page(rate, mean_rate, rows)
    print(text)
    if args.write:
        RESULTS.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

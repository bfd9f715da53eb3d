"""The comparison table: per group of runs (one setting, its seeds), the final measure's seeds,
"k of n" reaching a threshold, its IQM with the 95% stratified bootstrap interval, and the
probability of improvement between groups (:mod:`rlmem.stats`, after Agarwal et al., 2021).

Each family (an env, or a task at its ``T``) gets its own table: scores of different envs or
measures are not compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from rlmem.comparison.collection import Group
from rlmem.stats import count_meeting, iqm, iqm_estimate, probability_of_improvement_estimate

ALL_PAIRS = 5
"""Up to this many groups, every pair is compared; beyond, each group against the best."""


def number(value: float) -> str:
    """A measure as the table prints it: four significant digits."""
    return f"{value:.4g}"


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` with each column padded to its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
            .rstrip() for row in rows]


def _row(group: Group, threshold: float | None, reps: int) -> list[str]:
    finals = group.finals
    missing = len(group.runs) - finals.size
    # "0 (+1 ...)" read as seed 0: the count of runs measured is said as such.
    seeds = f"{finals.size} of {len(group.runs)} measured so far" if missing else f"{finals.size}"
    if not finals.size:
        return [group.label, seeds, *([""] if threshold is not None else []), "-", "-"]
    cells = [group.label, seeds]
    if threshold is not None:
        better = group.measure.better
        k, n = count_meeting(better(finals), float(better(np.array(threshold))))
        cells.append(f"{k} of {n}")
    estimate = iqm_estimate(finals, reps=reps)
    cells.append(f"{number(estimate.value)} [{number(estimate.low)}, {number(estimate.high)}]")
    order = sorted(group.runs, key=lambda run: run.seed)
    cells.append(", ".join(f"{run.seed}: {number(run.final)}" for run in order
                           if run.final is not None))
    return cells


def _pairs(groups: Sequence[Group], reps: int) -> list[str]:
    """``P(A > B) = p [low, high]`` lines: every pair, or each group against the best."""
    scored = [group for group in groups if group.finals.size]
    if len(scored) < 2:
        return []
    better = scored[0].measure.better
    if len(scored) <= ALL_PAIRS:
        pairs = list(combinations(scored, 2))
    else:
        best = max(scored, key=lambda group: iqm(better(group.finals)))
        pairs = [(best, group) for group in scored if group is not best]
    lines = ["P(improvement): the probability that a run of the first scores better than a run "
             "of the second, with its 95% CI:"]
    for first, second in pairs:
        estimate = probability_of_improvement_estimate(better(first.finals),
                                                       better(second.finals), reps=reps)
        lines.append(f"  P({first.label} > {second.label}) = {estimate.value:.2f} "
                     f"[{estimate.low:.2f}, {estimate.high:.2f}]")
    return lines


def family_table(groups: Sequence[Group], threshold: float | None = None,
                 reps: int = 2000) -> str:
    """The table of ``groups``, all of one family (one env, or one task and ``T``)."""
    measure = groups[0].measure
    way = "higher" if measure.higher_is_better else "lower"
    header = ["setting", "seeds"]
    if threshold is not None:
        header.append(f"{'≥' if measure.higher_is_better else '≤'} {number(threshold)}")
    header += ["IQM [95% CI]", "per seed"]
    lines = [f"{groups[0].family}: {measure.name} at the end of each run ({way} is better)",
             *("  " + line for line in _columns(
                 [header, *(_row(group, threshold, reps) for group in groups)]))]
    return "\n".join([*lines, *_pairs(groups, reps)])


def comparison_table(groups: Sequence[Group], threshold: float | None = None,
                     reps: int = 2000) -> str:
    """One :func:`family_table` per family of ``groups``, a blank line between them."""
    families = dict.fromkeys(group.family for group in groups)
    return "\n\n".join(family_table([group for group in groups if group.family == family],
                                    threshold, reps) for family in families)

"""How every RESULTS.md prints a number, and a set of seeds: one rounding, one layout.

Each figure of a RESULTS.md is printed by one function of this module from the number the run
data hold, never from another printed (rounded) figure: a rounding of a rounding can move the
last digit (18.046875% printed as 18.05, then as 18.1, where one rounding gives 18.0).

A set of seeds is reported as Agarwal et al. (2021) recommend (:mod:`rlmem.stats`): every
seed's value, their interquartile mean with its 95% stratified bootstrap interval, "k of n
seeds" meeting a claim's bar (n: the seeds run), and, for two cells compared, the probability
that a run of one scores above a run of the other, with its interval.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal

import numpy as np

from rlmem.stats import count_meeting, iqm_estimate, probability_of_improvement_estimate

Show = Callable[[float], str]
"""How one number is printed."""

DASH = "—"
"""A value not there (a run not made, a cell without the measure)."""


def rounded(value: float, digits: int) -> str:
    """``value`` to ``digits`` decimals: the exact number the float holds, rounded once, half
    to even (``f"{value:.{digits}f}"``, which rounds the exact binary value)."""
    return f"{value:.{digits}f}"


def percent(fraction: float) -> str:
    """A fraction in percent, one decimal: ``0.18046875`` is ``18.0%``. The percentage is
    taken exactly (in decimal), so no float product is rounded before the figure is."""
    return f"{Decimal(fraction).scaleb(2):.1f}%"


def decimal(value: float) -> str:
    """A return or a probability, two decimals."""
    return rounded(value, 2)


def three(value: float) -> str:
    """A return at three decimals (the per-seed tables)."""
    return rounded(value, 3)


def mse(value: float) -> str:
    """A mean squared error (or a cross-entropy), four decimals."""
    return rounded(value, 4)


def seeds(values: Sequence[float | None], show: Show, missing: str = DASH) -> str:
    """Each seed's value in seed order, ``missing`` for a seed without one."""
    return ", ".join(missing if value is None else show(value) for value in values) or DASH


def iqm_ci(values: Sequence[float], show: Show) -> str:
    """``IQM [low, high]`` of the seeds' values, its 95% stratified bootstrap interval
    (:func:`rlmem.stats.iqm_estimate`); the value alone for one seed, a dash for none."""
    if not values:
        return DASH
    if len(values) == 1:
        return show(values[0])
    estimate = iqm_estimate(list(values))
    return f"{show(estimate.value)} [{show(estimate.low)}, {show(estimate.high)}]"


def k_of_n(values: Sequence[float] | Sequence[Sequence[float]], threshold: float) -> str:
    """``k of n``: how many of the ``n`` seeds run reach ``threshold`` (on every task, for a
    seed given as a sequence of task scores); a dash for none run."""
    if not values:
        return DASH
    k, n = count_meeting(np.asarray(values, dtype=np.float64), threshold)
    return f"{k} of {n}"


def count(k: int, n: int) -> str:
    """``k of n`` from counts made elsewhere (a claim judged on several measures)."""
    return f"{k} of {n}"


def improvement(x: Sequence[float], y: Sequence[float]) -> str:
    """P(X > Y) with its 95% bootstrap interval (:func:`rlmem.stats.
    probability_of_improvement_estimate`), two decimals; a dash unless both have a seed."""
    if not x or not y:
        return DASH
    estimate = probability_of_improvement_estimate(list(x), list(y))
    return f"{decimal(estimate.value)} [{decimal(estimate.low)}, {decimal(estimate.high)}]"


def table(header: Sequence[str], rows: Sequence[Sequence[str]],
          align: Sequence[str] | None = None) -> list[str]:
    """A Markdown table; ``align`` is each column's ``---`` or ``---:`` (default ``---``)."""
    marks = list(align) if align is not None else ["---"] * len(header)
    return ["| " + " | ".join(header) + " |", "|" + "|".join(marks) + "|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def fill(template: str, sections: Mapping[str, Sequence[str] | str]) -> str:
    """``template`` with each ``{{name}}`` replaced by its section (lines joined by newlines).

    Raises:
        KeyError: a placeholder of the template has no section, or a section no placeholder.
    """
    text = template
    for name, lines in sections.items():
        mark = f"{{{{{name}}}}}"
        if mark not in text:
            raise KeyError(f"the template has no {mark}")
        text = text.replace(mark, lines if isinstance(lines, str) else "\n".join(lines))
    if "{{" in text:
        left = text[text.index("{{"):text.index("{{") + 40].split("}}")[0]
        raise KeyError(f"no section for {left}}}}}")
    return text

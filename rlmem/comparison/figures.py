"""The comparison figure: each family's learning curves (the IQM over seeds, shaded with its 95%
stratified bootstrap interval, frames or iterations on x) and, optionally, the performance
profile of the final measure (Agarwal et al., 2021: the fraction of runs scoring above each
threshold τ, with its interval), one column per family.

Shapes:
    - a curve on the grid: ``(points,)``; the seeds' values at one point: ``(seeds,)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.typing import NDArray

from rlmem.comparison.collection import Group
from rlmem.stats import iqm_estimate, score_distribution_estimate

POINTS = 100
"""The most points of a curve: a long run's thousands of rows are thinned to these."""

TAUS = 50
"""Thresholds of a performance profile."""

FIGURE_REPS = 500
"""Bootstrap resamples of each point's interval: enough for a shade."""


def curve_grid(groups: Sequence[Group]) -> NDArray[np.float64]:
    """The steps the curves of ``groups`` are drawn at: every step a run logged, thinned to
    :data:`POINTS`."""
    steps = np.unique(np.concatenate([run.x for group in groups for run in group.runs]
                                     or [np.zeros(0)]))
    if steps.size > POINTS:
        steps = steps[np.linspace(0, steps.size - 1, POINTS).round().astype(int)]
    return steps


def iqm_curve(group: Group, grid: NDArray[np.float64]
              ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64],
                         NDArray[np.float64]]:
    """``(steps, iqm, low, high)``: at each step of ``grid`` that a run of ``group`` spans, the
    IQM over those runs of their curves (interpolated between logged rows) and its interval."""
    rows = []
    for step in grid:
        values = [float(np.interp(step, run.x, run.y)) for run in group.runs
                  if run.x.size and run.x[0] <= step <= run.x[-1]]
        if values:
            estimate = iqm_estimate(values, reps=FIGURE_REPS)
            rows.append((step, estimate.value, estimate.low, estimate.high))
    table = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return table[:, 0], table[:, 1], table[:, 2], table[:, 3]


def _colours(count: int) -> list[tuple[float, ...]]:
    palette = colormaps["tab10" if count <= 10 else "tab20"]
    return [palette(i % palette.N) for i in range(count)]


def _draw_curves(axes: Axes, groups: Sequence[Group]) -> None:
    grid = curve_grid(groups)
    for group, colour in zip(groups, _colours(len(groups)), strict=True):
        steps, value, low, high = iqm_curve(group, grid)
        axes.plot(steps, value, color=colour, label=f"{group.label} ({len(group.runs)} seeds)")
        axes.fill_between(steps, low, high, color=colour, alpha=0.2, linewidth=0)
    measure = groups[0].measure
    axes.set_xlabel(measure.steps)
    axes.set_ylabel(f"{measure.name} (IQM over seeds, 95% CI)")
    axes.set_title(groups[0].family)
    axes.legend(fontsize="small")


def _draw_profile(axes: Axes, groups: Sequence[Group]) -> None:
    scored = [group for group in groups if group.finals.size]
    if not scored:
        return
    measure = scored[0].measure
    finals = np.concatenate([group.finals for group in scored])
    taus = np.linspace(finals.min(), finals.max(), TAUS)
    for group, colour in zip(scored, _colours(len(scored)), strict=True):
        profile = score_distribution_estimate(measure.better(group.finals), measure.better(taus))
        axes.plot(taus, profile.value, color=colour, label=group.label)
        axes.fill_between(taus, profile.low, profile.high, color=colour, alpha=0.2, linewidth=0)
    side = "above" if measure.higher_is_better else "below"
    axes.set_xlabel(f"τ ({measure.name} at the end)")
    axes.set_ylabel(f"fraction of runs {side} τ")
    axes.set_ylim(-0.02, 1.02)
    axes.legend(fontsize="small")


def write_comparison_figure(groups: Sequence[Group], path: Path, profile: bool = False
                            ) -> Path:
    """Draw the curves of ``groups`` (and their profiles) into ``path`` (PNG, PDF or SVG, by
    its suffix); returns ``path``."""
    families = list(dict.fromkeys(group.family for group in groups))
    rows = 2 if profile else 1
    figure = Figure(figsize=(6 * len(families), 4.2 * rows), layout="constrained")
    axes = figure.subplots(rows, len(families), squeeze=False)
    for column, family in enumerate(families):
        members = [group for group in groups if group.family == family]
        _draw_curves(axes[0][column], members)
        if profile:
            _draw_profile(axes[1][column], members)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path

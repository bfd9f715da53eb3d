"""Tabulate the memory suite into ``RESULTS.md`` and plot its learning curves.

    python -m experiments.memory.aggregate

Reads ``runs/MemoryS7/<label>/seed<k>/`` as written by ``suite.py``: ``progress.csv`` (the
learning curve; ``return_recent`` is the mean return of the last 100 training episodes) and
``eval/MemoryS7.json`` / ``eval/MemoryS13.json`` (evaluation episodes with sampled actions).
Writes ``RESULTS.md`` from ``RESULTS.template.md`` and ``curves.png``.

Each row gives every seed's value, their IQM with its 95% stratified bootstrap interval and
"k of n seeds" solving MemoryS7 (n: the seeds run; a seed the suite declares but has not run is
named), and each cell is compared with the LSTM of its recipe by the probability of
improvement (:mod:`experiments.common.report`). ``render`` builds the text without writing, so
a test can compare it with the committed file.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from experiments.common import report
from experiments.common.evaluations import suite_evaluations
from experiments.common.report import DASH, iqm_ci
from experiments.common.run_config import config_value
from experiments.memory.suite import (
    ABLATIONS,
    HEADLINE,
    LABELS,
    RECIPE,
    REFERENCE,
    SEEDS,
    STOP_RETURN,
    VIEW3,
    seeds_of,
)
from rlmem.cells import CELLS
from rlmem.runs.progress import read_progress

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs" / "MemoryS7"
SOLVED = 0.9
"""The issue's bar: an evaluation return of at least this on MemoryS7."""
S13_TARGET = 0.75
"""The memory recipe's bar: MemoryS13 success of at least this, zero-shot."""
RECIPE_5M = ("relstm_view3_direction_5M", "lstm_view3_direction_5M",
             "memlstm_view3_direction_5M")
"""The memory recipe at the paper's 5M frames, the three cells."""

PAPER = {  # Kerg et al. (2020), Table 3: average reward after 5M frames of PPO
    "lstm": (0.96, 0.25), "memlstm": (0.40, 0.24), "relstm": (0.94, 0.30)}


@dataclass
class Run:
    """One seed of one label."""

    seed: int
    stop_return: float | None = None
    """The run's stop rule (the 1000-episode mean it stopped at; None: all frames)."""
    frames: list[float] = field(default_factory=list)
    recent: list[float] = field(default_factory=list)
    evaluations: dict[str, dict] = field(default_factory=dict)

    def frames_to(self, target: float) -> float | None:
        """Frames at which the 100-episode training mean first reached ``target``."""
        return next((f for f, r in zip(self.frames, self.recent, strict=True) if r >= target),
                    None)


def read_run(path: Path) -> Run:
    run = Run(int(path.name.removeprefix("seed")))
    if (path / "config.yaml").exists():
        stop = config_value(path, "stop_return")
        run.stop_return = None if stop is None else float(str(stop))
    if (path / "progress.csv").exists():
        for row in read_progress(path / "progress.csv"):
            value = row.finite("return_recent")
            if value is not None:
                run.frames.append(row.number("frames"))
                run.recent.append(value)
    if run.frames:  # evaluations of the final model, not of an earlier checkpoint
        run.evaluations.update(suite_evaluations(path, frames=run.frames[-1]))
    return run


def collect() -> dict[str, list[Run]]:
    labels = sorted((p.name for p in RUNS.iterdir() if p.is_dir()),
                    key=lambda n: LABELS.index(n) if n in LABELS else len(LABELS)) \
        if RUNS.exists() else []
    return {label: [read_run(p) for p in sorted((RUNS / label).glob("seed*"))]
            for label in labels}


def evaluated(runs: list[Run], env: str, key: str = "return_mean") -> list[float]:
    """``key`` of each run's final evaluation on ``env``, in seed order (runs without one
    are left out: they show a dash per seed)."""
    return [float(run.evaluations[env][key]) for run in runs if env in run.evaluations]


def per_seed_values(runs: list[Run], env: str, key: str, show: report.Show) -> str:
    return report.seeds([float(run.evaluations[env][key]) if env in run.evaluations else None
                         for run in runs], show)


def not_run(label: str, runs: list[Run]) -> list[int]:
    """The seeds the suite declares for ``label`` (at its default, :data:`SEEDS`) without a run
    here."""
    ran = {run.seed for run in runs}
    return [seed for seed in seeds_of(label, SEEDS) if seed not in ran] if label in LABELS else []


def frames_cell(runs: list[Run]) -> str:
    reached = [run.frames_to(SOLVED) for run in runs]
    return ", ".join(DASH if f is None else f"{f / 1e3:.0f}k" for f in reached)


def table(results: dict[str, list[Run]]) -> list[str]:
    rows = []
    for label, runs in results.items():
        s7 = evaluated(runs, "MemoryS7")
        missing = not_run(label, runs)
        trained = ", ".join(f"{r.frames[-1] / 1e3:.0f}k" for r in runs if r.frames) or DASH
        paper = PAPER.get(label)
        rows.append([
            label, f"{len(runs)}" + (f" (not run: {', '.join(map(str, missing))})"
                                     if missing else ""),
            frames_cell(runs), trained,
            per_seed_values(runs, "MemoryS7", "return_mean", report.decimal),
            iqm_ci(s7, report.decimal),
            iqm_ci(evaluated(runs, "MemoryS7", "success_rate"), report.percent),
            report.k_of_n(s7, SOLVED),
            per_seed_values(runs, "MemoryS13", "return_mean", report.decimal),
            iqm_ci(evaluated(runs, "MemoryS13"), report.decimal),
            iqm_ci(evaluated(runs, "MemoryS13", "success_rate"), report.percent),
            f"{report.decimal(paper[0])} / {report.decimal(paper[1])}" if paper else ""])
    return report.table(
        ["cell", "seeds", "frames to 0.9 (per seed)", "frames trained",
         "MemoryS7 return, per seed", "MemoryS7 return, IQM [95% CI]",
         "MemoryS7 success, IQM [95% CI]", "solved (≥ 0.9), k of n",
         "MemoryS13 return, per seed", "MemoryS13 return, IQM [95% CI]",
         "MemoryS13 success, IQM [95% CI]", "paper S7 / S13"], rows,
        ["---", "---:", "---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:",
         "---:"])


def reference(label: str) -> str:
    """The LSTM a label is compared with: the LSTM of the same recipe and budget."""
    for suffix in ("_view3_direction_5M", "_view3_direction", "_view3"):
        if label.endswith(suffix):
            return "lstm" + suffix
    return "lstm"


def comparisons(results: dict[str, list[Run]]) -> list[str]:
    """P(cell > its recipe's LSTM) on the MemoryS7 and MemoryS13 evaluation returns."""
    rows = []
    for label, runs in results.items():
        other = reference(label)
        if label == other or other not in results:
            continue
        base = results[other]
        rows.append([f"{label} vs {other}", f"{len(evaluated(runs, 'MemoryS7'))} vs "
                     f"{len(evaluated(base, 'MemoryS7'))}",
                     report.improvement(evaluated(runs, "MemoryS7"),
                                        evaluated(base, "MemoryS7")),
                     report.improvement(evaluated(runs, "MemoryS13"),
                                        evaluated(base, "MemoryS13"))])
    return report.table(["cell vs the LSTM of its recipe", "seeds",
                         "P(cell > lstm), MemoryS7 return [95% CI]",
                         "P(cell > lstm), MemoryS13 return [95% CI]"], rows,
                        ["---", "---:", "---:", "---:"])


def recipe_claim(results: dict[str, list[Run]]) -> list[str]:
    """The memory recipe at 5M frames: each cell's MemoryS13 success and return per seed,
    IQM [95% CI], and k of n seeds at 75% success."""
    rows = []
    for label in RECIPE_5M:
        runs = results.get(label, [])
        success = evaluated(runs, "MemoryS13", "success_rate")
        missing = not_run(label, runs)
        rows.append([label, f"{len(runs)}" + (f" (not run: {', '.join(map(str, missing))})"
                                              if missing else ""),
                     per_seed_values(runs, "MemoryS13", "success_rate", report.percent),
                     iqm_ci(success, report.percent), report.k_of_n(success, S13_TARGET),
                     per_seed_values(runs, "MemoryS13", "return_mean", report.decimal),
                     iqm_ci(evaluated(runs, "MemoryS13"), report.decimal)])
    return report.table(["cell (recipe, 5M frames)", "seeds", "MemoryS13 success, per seed",
                         "MemoryS13 success, IQM [95% CI]", "≥ 75% success, k of n",
                         "MemoryS13 return, per seed", "MemoryS13 return, IQM [95% CI]"],
                        rows, ["---", "---:", "---:", "---:", "---:", "---:", "---:"])


def per_seed(results: dict[str, list[Run]]) -> list[str]:
    lines = ["| cell | seed | stop_return | frames to 0.9 | frames trained | S7 return | "
             "S7 success | S13 return | S13 success |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, runs in results.items():
        for run in runs:
            reached = run.frames_to(SOLVED)
            cells = [label, str(run.seed), DASH if run.stop_return is None else
                     report.decimal(run.stop_return), DASH if reached is None else
                     f"{reached:.0f}", f"{run.frames[-1]:.0f}" if run.frames else DASH]
            for env in ("MemoryS7", "MemoryS13"):
                found = run.evaluations.get(env)
                cells += ([report.three(found["return_mean"]),
                           report.percent(found["success_rate"])] if found else [DASH, DASH])
            lines.append("| " + " | ".join(cells) + " |")
        lines += [f"| {label} | {seed} | not run | {DASH} | {DASH} | {DASH} | {DASH} | {DASH} "
                  f"| {DASH} |" for seed in not_run(label, runs)]
    return lines


def earlier_rule(results: dict[str, list[Run]]) -> str:
    """The runs whose recorded ``stop_return`` is not the suite's :data:`STOP_RETURN` (those
    stopped by the earlier rule), for the prose: ``label`` seed k (its rule), or "none"."""
    stopped = [f"`{label}` seed {run.seed} ({report.decimal(run.stop_return)})"
               for label, runs in results.items() for run in runs
               if run.stop_return is not None and run.stop_return != STOP_RETURN]
    return ", ".join(stopped) or "none"


def panels(labels: Sequence[str]) -> list[tuple[str, list[str]]]:
    """The figure's panels, each a title and the labels of ``labels`` it draws, at most about
    ten: the paper's cells with sb3-contrib's LSTM, the other cells beside lstm, the ablations
    of the default recipe beside lstm, and the memory recipe (3×3 view, heading). A label of no
    panel (a folder the suite no longer declares) gets one of its own."""
    recipe = [label for label, ablation in ABLATIONS.items()
              if VIEW3 in ablation.overrides or RECIPE in ablation.overrides]
    groups = [
        ("the paper's cells and sb3-contrib's LSTM", [*HEADLINE, REFERENCE]),
        ("the other cells, beside lstm",
         ["lstm", *(label for label in LABELS if label in CELLS and label not in HEADLINE)]),
        ("ablations of the default recipe, beside lstm",
         ["lstm", *(label for label in ABLATIONS if label not in recipe)]),
        ("the memory recipe: 3×3 view, then the heading", recipe)]
    drawn = {label for _, members in groups for label in members}
    groups.append(("other runs", [label for label in labels if label not in drawn]))
    return [(title, [label for label in members if label in labels])
            for title, members in groups if any(label in labels for label in members)]


def plot(results: dict[str, list[Run]]) -> Path:
    """``curves.png``: every seed's training curve, one panel per group of :func:`panels`, one
    colour per label within a panel."""
    groups = panels(list(results))
    columns = 2 if len(groups) > 1 else 1
    rows = max(1, -(-len(groups) // columns))
    figure, grid = plt.subplots(rows, columns, figsize=(6.5 * columns, 4 * rows), sharey=True,
                                squeeze=False)
    for axes, (title, labels) in zip(grid.flat, groups, strict=False):
        for index, label in enumerate(labels):
            for k, run in enumerate(results[label]):
                axes.plot(run.frames, run.recent, color=f"C{index}", linewidth=1, alpha=0.8,
                          label=label if k == 0 else None)
        axes.axhline(SOLVED, color="grey", linestyle=":", linewidth=1)
        axes.set_title(title, fontsize=10)
        axes.set_xlabel("frames")
        axes.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1e6:g}M"))
        axes.set_ylim(0.3, 1.0)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7, loc="lower right")
    for axes in grid[:, 0]:
        axes.set_ylabel("mean return, last 100 episodes")
    for axes in list(grid.flat)[len(groups):]:
        axes.set_visible(False)
    figure.suptitle("MiniGrid MemoryS7: PPO, one line per seed")
    figure.tight_layout()
    path = HERE / "curves.png"
    figure.savefig(path, dpi=90)  # 1,170 × 720 px for four panels
    plt.close(figure)
    return path


def render(results: dict[str, list[Run]]) -> str:
    """RESULTS.md from the template and ``results``."""
    return report.fill((HERE / "RESULTS.template.md").read_text(), {
        "table": table(results), "comparisons": comparisons(results),
        "recipe": recipe_claim(results), "per_seed": per_seed(results),
        "earlier_rule": earlier_rule(results)})


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter
                            ).parse_args(argv)  # no options but --help
    results = collect()
    plot(results)
    text = render(results)
    (HERE / "RESULTS.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

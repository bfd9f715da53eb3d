"""Tabulate the transfer suite into ``RESULTS.md`` and plot its learning curves.

    python -m experiments.transfer.aggregate

Reads ``runs/<env>/<memory>/seed<k>/`` (``eval/<env>.json`` and ``progress.csv``), as written by
``experiments.transfer.suite``, and the MemoryS7 runs of ``experiments.memory.suite``, and
writes ``RESULTS.md`` with a table laid out like Table 3 of the ReLSTM paper (the IQM over
seeds of the mean evaluation return with its 95% stratified bootstrap interval, the paper's
number in brackets), every seed's value with "k of n" seeds at or above the paper's number,
P(relstm > lstm) on each env, DoorKey-5x5 -> DoorKey-16x16 at the paper's 5M frames (``runs_5M/``)
beside the 500k runs, the same on the ReLSTM authors' code path (``runs_kerg2020_code/``,
evaluated as we evaluate and as the authors count episodes), the same table for the runs of
rlmem 0.1 (``runs_v0_1/``: raw grid input, forget-gate bias 0) as the "before", and
``plots/<env>.png``, the training return against frames for every memory. ``render`` builds
the text without writing.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt

from experiments.common import report
from experiments.common.evaluations import suite_evaluations
from experiments.common.report import DASH, iqm_ci
from experiments.common.run_config import config_value
from experiments.common.sweep import final_frames
from experiments.memory import aggregate as memory_aggregate
from rlmem.envs import transfer_target
from rlmem.runs import progress as progress_csv

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
MEMORY_RUNS = HERE.parent / "memory" / "runs"
"""MemoryS7 -> MemoryS13 comes from the memory suite, which trains it for longer."""
RUNS_5M = HERE / "runs_5M"
"""DoorKey-5x5 -> DoorKey-16x16 at the paper's budget (``--frames 5001216``), the paper's three
cells, seeds 0-4."""
SEEDS_5M = 5
RUNS_KERG2020_CODE = HERE / "runs_kerg2020_code"
"""DoorKey-5x5 -> DoorKey-16x16 on the ReLSTM authors' code path at 5M frames, relstm and lstm,
seeds 0-4 (``python -m experiments.transfer.kerg2020_code``)."""
BEFORE_RUNS = HERE / "runs_v0_1"
"""The table as rlmem 0.1 made it: raw grid floats, forget-gate bias 0, smaller budgets."""
PLOTS = HERE / "plots"

PAPER: dict[str, dict[str, float]] = {
    # Table 3 of Kerg et al. (2020): average reward after 5M frames of PPO.
    "RedBlueDoors-6x6": {"lstm": 0.97, "memlstm": 0.97, "relstm": 0.97},
    "GoToObject-6x6-N2": {"lstm": 0.81, "memlstm": 0.85, "relstm": 0.84},
    "MemoryS7": {"lstm": 0.96, "memlstm": 0.4, "relstm": 0.94},
    "GoToDoor-5x5": {"lstm": 0.28, "memlstm": 0.17, "relstm": 0.25},
    "Fetch-5x5-N2": {"lstm": 0.48, "memlstm": 0.42, "relstm": 0.5},
    "DoorKey-5x5": {"lstm": 0.94, "memlstm": 0.94, "relstm": 0.93},
    "RedBlueDoors-8x8": {"lstm": 0.95, "memlstm": 0.95, "relstm": 0.95},
    "GoToObject-8x8-N2": {"lstm": 0.66, "memlstm": 0.66, "relstm": 0.74},
    "MemoryS13": {"lstm": 0.25, "memlstm": 0.24, "relstm": 0.30},
    "GoToDoor-8x8": {"lstm": 0.13, "memlstm": 0.11, "relstm": 0.15},
    "Fetch-8x8-N3": {"lstm": 0.38, "memlstm": 0.44, "relstm": 0.45},
    "DoorKey-16x16": {"lstm": 0.09, "memlstm": 0.31, "relstm": 0.44},
}
TRAIN_ENVS = ["RedBlueDoors-6x6", "GoToObject-6x6-N2", "MemoryS7", "GoToDoor-5x5",
              "Fetch-5x5-N2", "DoorKey-5x5"]
MEMORY_ORDER = ["lstm", "memlstm", "relstm", "gru", "relrnn", "tarnn", "sarnn", "irnn", "ernn",
                "sb3_lstm"]


def read_progress(path: Path) -> tuple[list[float], list[float]]:
    """Frames and the training return of each update that finished episodes."""
    frames, returns = [], []
    for row in progress_csv.read_progress(path):
        value = row.finite("return_mean")
        if value is not None:
            frames.append(row.number("frames"))
            returns.append(value)
    return frames, returns


def collect(run_dirs: list[Path], with_curves: bool = True,
            first_to_end: bool = False) -> tuple[dict, dict, dict, dict]:
    """``scores[env][memory]`` (one evaluation mean return per seed), the success rates in
    the same layout, the frames trained per (train env, memory), and the learning curves per
    train env and memory, from ``run_dirs`` (each ``<env>/<memory>/seed<k>``).

    Scores and success rates count an evaluation of the run's final checkpoint only, and of a
    (train env, memory) only the runs launched with the largest frame budget: a mean over seeds
    at different budgets would compare nothing (the others wait to be resumed to it, and the
    frames table lists them). Runs stopped early by ``stop_return`` keep their budget.
    ``with_curves=False`` leaves the learning curves out (the tables do not need them);
    ``first_to_end`` counts the evaluations whose episodes were counted as the authors count
    them instead (:func:`~experiments.common.evaluations.suite_evaluations`)."""
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    successes: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    frames: dict[tuple[str, str], set[int]] = defaultdict(set)
    curves: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    budgets: dict[tuple[str, str], int] = defaultdict(int)
    reports = []
    for run in run_dirs:
        env, memory = run.parent.parent.name, run.parent.name
        budget = int(str(config_value(run, "frames")))
        budgets[(env, memory)] = max(budgets[(env, memory)], budget)
        final = final_frames(run)
        for data in suite_evaluations(run, frames=final, first_to_end=first_to_end).values():
            reports.append((env, memory, budget, data))
            frames[(env, memory)].add(int(data["frames"]))
        if with_curves and (run / "progress.csv").exists():
            curves[env][memory].append(read_progress(run / "progress.csv"))
    for env, memory, budget, data in reports:
        if budget == budgets[(env, memory)]:
            scores[data["env"]][memory].append(data["return_mean"])
            successes[data["env"]][memory].append(data["success_rate"])
    return scores, successes, frames, curves


def table(scores: dict, memories: list[str], paper: dict[str, dict[str, float]]) -> list[str]:
    """Rows laid out like Table 3: the train envs, then their transfer targets."""
    lines = ["| Environment | " + " | ".join(memories) + " |", "|---|" + "---:|" * len(memories)]
    for title, envs in (("Train", TRAIN_ENVS), ("Test", [transfer_target(e) for e in TRAIN_ENVS])):
        lines.append(f"| **{title}** |" + " |" * len(memories))
        for env in envs:
            lines.append(f"| {env} | " + " | ".join(
                cell(scores[env][m], paper.get(env, {}).get(m)) for m in memories) + " |")
    return lines


def cell(values: list[float], paper: float | None) -> str:
    """IQM [95% CI] of the seeds (their value for one), the paper's number in brackets."""
    ours = iqm_ci(values, report.decimal)
    return f"{ours} ({report.decimal(paper)})" if paper is not None else ours


HEADLINE_MEMORIES = ("lstm", "memlstm", "relstm")
"""The paper's three cells, which every train env runs with three seeds."""


def envs_in_order() -> list[str]:
    return [*TRAIN_ENVS, *(transfer_target(env) for env in TRAIN_ENVS)]


def per_seed(scores: dict) -> list[str]:
    """The paper's three cells on every env: each seed's return, IQM [95% CI], and how many
    seeds reach the paper's number."""
    lines = []
    for env in envs_in_order():
        for memory in HEADLINE_MEMORIES:
            values = scores[env][memory]
            paper = PAPER.get(env, {}).get(memory)
            lines.append([env, memory, report.seeds(values, report.three),
                          iqm_ci(values, report.decimal),
                          DASH if paper is None else report.decimal(paper),
                          DASH if paper is None else report.k_of_n(values, paper)])
    return report.table(["Environment", "memory", "return per seed", "IQM [95% CI]", "paper",
                         "seeds ≥ paper, k of n"], lines,
                        ["---", "---", "---:", "---:", "---:", "---:"])


def comparisons(scores: dict) -> list[str]:
    """P(relstm > lstm) and P(relstm > memlstm) on every env, with 95% bootstrap intervals."""
    lines = [[env, report.improvement(scores[env]["relstm"], scores[env]["lstm"]),
              report.improvement(scores[env]["relstm"], scores[env]["memlstm"]),
              report.improvement(scores[env]["memlstm"], scores[env]["lstm"])]
             for env in envs_in_order()]
    return report.table(["Environment", "P(relstm > lstm) [95% CI]",
                         "P(relstm > memlstm) [95% CI]", "P(memlstm > lstm) [95% CI]"],
                        lines, ["---", "---:", "---:", "---:"])


def paper_budget(scores_500k: dict) -> list[str]:
    """DoorKey-5x5 and its zero-shot DoorKey-16x16 at 5M frames (``runs_5M/``) beside the 500k
    runs and the paper: every seed, IQM [95% CI], k of n seeds at the paper's number, and
    P(X > lstm) on DoorKey-16x16."""
    scores, successes, _, _ = collect(sorted(RUNS_5M.glob("DoorKey-5x5/*/seed*")),
                                      with_curves=False)
    rows = []
    for memory in HEADLINE_MEMORIES:
        for env in ("DoorKey-5x5", "DoorKey-16x16"):
            values = scores[env][memory]
            paper = PAPER[env][memory]
            rows.append([env, memory, f"{len(values)} of {SEEDS_5M}",
                         report.seeds(values, report.three), iqm_ci(values, report.decimal),
                         iqm_ci(successes[env][memory], report.percent),
                         report.decimal(paper), report.k_of_n(values, paper),
                         iqm_ci(scores_500k[env][memory], report.decimal),
                         DASH if memory == "lstm" or env != "DoorKey-16x16" else
                         report.improvement(values, scores[env]["lstm"])])
    return report.table(
        ["Environment", "memory", "seeds evaluated", "return per seed (5M)",
         "return IQM [95% CI] (5M)", "success IQM [95% CI] (5M)", "paper (5M)",
         "seeds ≥ paper, k of n", "return IQM [95% CI] at 500k", "P(X > lstm) [95% CI]"],
        rows, ["---", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"])


def authors_code_path() -> list[str]:
    """DoorKey-5x5 and DoorKey-16x16 on the authors' code path (``runs_kerg2020_code/``):
    every seed evaluated as we evaluate and as the authors count, IQM [95% CI], and on each
    count P(X > our relstm at 5M, ``runs_5M/``) and P(X > the recipe's lstm)."""
    runs = sorted(RUNS_KERG2020_CODE.glob("DoorKey-5x5/*/seed*"))
    ours, successes, _, _ = collect(runs, with_curves=False)
    theirs, _, _, _ = collect(runs, with_curves=False, first_to_end=True)
    runs_5m = sorted(RUNS_5M.glob("DoorKey-5x5/relstm/seed*"))
    ours_5m = collect(runs_5m, with_curves=False)[0]
    theirs_5m = collect(runs_5m, with_curves=False, first_to_end=True)[0]
    rows = []
    for memory in ("relstm", "lstm"):
        for env in ("DoorKey-5x5", "DoorKey-16x16"):
            values, counted = ours[env][memory], theirs[env][memory]
            versus = [DASH] * 4 if memory == "lstm" else [
                report.improvement(values, ours_5m[env]["relstm"]),
                report.improvement(values, ours[env]["lstm"]),
                report.improvement(counted, theirs_5m[env]["relstm"]),
                report.improvement(counted, theirs[env]["lstm"])]
            rows.append([env, memory, f"{len(values)} of {SEEDS_5M}",
                         report.seeds(values, report.three), iqm_ci(values, report.decimal),
                         iqm_ci(successes[env][memory], report.percent),
                         report.seeds(counted, report.three), iqm_ci(counted, report.decimal),
                         report.decimal(PAPER[env][memory]), *versus])
    return report.table(
        ["Environment", "memory (recipe)", "seeds evaluated", "return per seed, ours",
         "return IQM [95% CI], ours", "success IQM [95% CI], ours",
         "return per seed, authors' count", "return IQM [95% CI], authors' count",
         "paper (5M)", "P(X > our relstm), ours", "P(X > recipe's lstm), ours",
         "P(X > our relstm), authors' count", "P(X > recipe's lstm), authors' count"],
        rows, ["---", "---", *["---:"] * 11])


def plot(env: str, runs: dict[str, list]) -> Path:
    """Training return against frames, one line per seed, one colour per memory."""
    PLOTS.mkdir(exist_ok=True)
    figure, axes = plt.subplots(figsize=(6, 3.6))
    for index, memory in enumerate(m for m in MEMORY_ORDER if m in runs):
        for seed, (frames, returns) in enumerate(runs[memory]):
            axes.plot(frames, returns, color=f"C{index}", alpha=0.8, linewidth=1,
                      label=memory if seed == 0 else None)
    axes.set_xlabel("frames")
    axes.set_ylabel("mean training return")
    axes.set_title(f"{env} (PPO, training episodes)")
    axes.set_ylim(-0.02, 1.0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, ncol=2)
    figure.tight_layout()
    path = PLOTS / f"{env}.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def render(plots: bool = False) -> str:
    """RESULTS.md from the template and the runs (and the learning-curve plots if
    ``plots``)."""
    scores, successes, frames, curves = collect(
        [run for run in sorted(RUNS.glob("*/*/seed*")) if run.parent.parent.name != "MemoryS7"]
        + sorted(MEMORY_RUNS.glob("MemoryS7/*/seed*")), with_curves=plots)
    before, _, _, _ = collect(sorted(BEFORE_RUNS.glob("*/*/seed*")), with_curves=False)
    memories = [m for m in MEMORY_ORDER
                if any(m in table_[env] for table_ in (scores, before) for env in table_)]
    budget = []
    for env in TRAIN_ENVS:
        for memory in memories:
            if (env, memory) in frames:
                budget.append([env, memory, str(len(scores[env][memory])),
                               ", ".join(map(str, sorted(frames[(env, memory)])))])
    shown = [env for env in TRAIN_ENVS if curves.get(env)] if plots else \
        [env for env in TRAIN_ENVS if any(run.parent.parent.name == env for run in
                                          [*RUNS.glob(f"{env}/*/seed*"),
                                           *MEMORY_RUNS.glob(f"{env}/*/seed*")]
                                          if (run / "progress.csv").exists())]
    names = [plot(env, curves[env]).name if plots else f"{env}.png" for env in shown]
    figures = [f"![{env}](plots/{name})" for env, name in zip(shown, names, strict=True)]
    return report.fill((HERE / "RESULTS.template.md").read_text(), {
        "table": table(scores, memories, PAPER), "success": table(successes, memories, {}),
        "per_seed": per_seed(scores), "comparisons": comparisons(scores),
        "paper_budget": paper_budget(scores), "authors_code": authors_code_path(),
        "recipe": memory_aggregate.recipe_claim(memory_aggregate.collect()),
        "budget": report.table(["Train env", "memory", "seeds in the tables",
                                "frames per run (all seeds)"], budget,
                               ["---", "---", "---:", "---:"]),
        "before": table(before, memories, PAPER), "figures": "\n\n".join(figures)})


def main(argv: Sequence[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter
                            ).parse_args(argv)  # no options but --help
    text = render(plots=True)
    (HERE / "RESULTS.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

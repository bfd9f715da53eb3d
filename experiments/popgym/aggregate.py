"""Tabulate the POPGym suite into ``RESULTS.md`` and ``mmer.csv``.

    python -m experiments.popgym.aggregate [--runs DIR]

Reads every ``runs/<env>/<agent>/seed<k>/`` that ``suite.py`` writes (our runs and sb3-contrib's
alike: ``config.yaml`` for the run's frame budget, ``progress.csv`` for its curve), scores each
finished run by its maximum mean episodic reward (:mod:`experiments.popgym.mmer`) and writes:

- ``mmer.csv``: one row per run found (env, agent, seed, frames trained, budget, finished,
  MMER), committed, so the tables can be recomputed without the runs' curves;
- ``RESULTS.md`` from ``RESULTS.template.md`` (from ``RESULTS.budget.template.md`` for runs at
  another budget than the suite's own, ``suite.py --frames``): per env and agent the per-seed
  MMERs, their IQM with a 95% stratified bootstrap interval (:mod:`rlmem.stats`), and the
  POPGym paper's number where we have it; the probability that our lstm beats sb3-contrib's
  RecurrentPPO, per env and over all envs, with its interval; and a summary of every agent
  across envs.

It runs on partial results: a row without finished runs says "not run" (or how many runs are
still training), and only finished runs (their ``progress.csv`` reaches their config's frames)
count. A run of ours counts only where it recorded today's preset values
(:func:`~experiments.popgym.suite.superseded`): when a preset changes, the runs made with the
earlier values stay in ``mmer.csv`` and leave the tables until the suite has run them again.
"""

from __future__ import annotations

import argparse
import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from experiments.popgym.mmer import read_curve
from experiments.popgym.suite import AGENTS, ENVS, FRAMES, REFERENCE, RUNS, superseded
from rlmem.stats import iqm, iqm_estimate, probability_of_improvement_estimate

HERE = Path(__file__).resolve().parent
OURS = "lstm"
"""The agent compared with :data:`~experiments.popgym.suite.REFERENCE`."""

PAPER: dict[tuple[str, str], float] = {}
"""The POPGym paper's MMER of (env, ``lstm`` or ``gru``): Morad et al. (2023), the appendix's
per-env table (PPO, 15M frames per trial, mean over its trials). Empty: the table could not be
read in the offline setting this suite was written in, and no number is filled in from memory.
Fill it from the paper, e.g. ``("RepeatPreviousEasy", "lstm"): <value>``, and ``aggregate``
prints it beside ours."""
PAPER_FRAMES = 15_000_000
"""Frames per trial in the POPGym paper (``popgym/baselines/ppo.py``: ``POPGYM_STEPS``)."""


@dataclass(frozen=True)
class Run:
    """One seed of one agent on one env, as ``aggregate`` scores it."""

    env: str
    agent: str
    seed: int
    frames: float | None
    """Frames trained (None before the first update)."""
    budget: int | None
    """Its config's ``frames`` (None without a config)."""
    counted: tuple[float, ...]
    """The 100-episode means at its counted points (:meth:`~experiments.popgym.mmer.Curve.counted`),
    in the order of the updates."""
    superseded: bool = False
    """Made with preset values other than today's
    (:func:`~experiments.popgym.suite.superseded`): not counted."""

    @property
    def mmer(self) -> float | None:
        """The largest of :attr:`counted` (None: no point counts)."""
        return max(self.counted) if self.counted else None

    @property
    def finished(self) -> bool:
        return self.frames is not None and self.budget is not None and \
            self.frames >= self.budget


def read_run(path: Path) -> Run:
    """The run in ``path`` (``<env>/<agent>/seed<k>``)."""
    budget, earlier = None, False
    if (path / "config.yaml").exists():
        config = OmegaConf.load(path / "config.yaml")
        assert isinstance(config, DictConfig)  # a run's config.yaml is a mapping
        budget, earlier = int(config.frames), superseded(config)
    curve = read_curve(path)
    return Run(path.parent.parent.name, path.parent.name, int(path.name.removeprefix("seed")),
               curve.final_frames, budget, tuple(curve.counted()), earlier)


def collect(root: Path) -> list[Run]:
    """Every run under ``root``, in the suite's order of envs, agents and seeds."""
    def order(run: Run) -> tuple[int, int, int]:
        return (ENVS.index(run.env) if run.env in ENVS else len(ENVS),
                AGENTS.index(run.agent) if run.agent in AGENTS else len(AGENTS), run.seed)

    return sorted((read_run(path) for path in root.glob("*/*/seed*") if path.is_dir()),
                  key=order)


def scores(runs: Sequence[Run], env: str, agent: str) -> dict[int, float]:
    """The MMER of each finished run of ``agent`` on ``env``, by seed."""
    return {run.seed: run.mmer for run in runs if run.env == env and run.agent == agent
            and run.finished and not run.superseded and run.mmer is not None}


def envs_of(runs: Sequence[Run]) -> list[str]:
    """The suite's envs, then any other env that has runs."""
    return [*ENVS, *sorted({run.env for run in runs} - set(ENVS))]


def agents_of(runs: Sequence[Run]) -> list[str]:
    """The suite's agents, then any other label that has runs."""
    return [*AGENTS, *sorted({run.agent for run in runs} - set(AGENTS))]


def matrix(by_env: dict[str, dict[int, float]], envs: Sequence[str]) -> np.ndarray | None:
    """The ``seeds × envs`` matrix of the seeds that have a score on every env of ``envs``
    (None when there is none, or no env)."""
    if not envs:
        return None
    seeds = sorted(set.intersection(*(set(by_env[env]) for env in envs)))
    if not seeds:
        return None
    return np.array([[by_env[env][seed] for env in envs] for seed in seeds])


def per_env(runs: Sequence[Run]) -> list[str]:
    lines = ["| env | agent | seeds | frames | MMER per seed (0, 1, ...) | IQM [95% CI] | "
             "paper (15M frames) |", "|---|---|---:|---:|---|---|---:|"]
    for env in envs_of(runs):
        for agent in agents_of(runs):
            found = [run for run in runs if run.env == env and run.agent == agent]
            done = scores(runs, env, agent)
            paper = PAPER.get((env, agent))
            paper_cell = f"{paper:.3f}" if paper is not None else (
                "not found offline" if agent in ("lstm", "gru") else "")
            if not done:
                training = sum(not run.finished for run in found)
                earlier = sum(run.finished and run.superseded for run in found)
                notes = [f"{training} training"] * bool(training) + [
                    f"{earlier} with an earlier preset"] * bool(earlier)
                state = f"not run ({', '.join(notes)})" if notes else "not run"
                lines.append(f"| {env} | {agent} | 0 | — | {state} | — | {paper_cell} |")
                continue
            frames = sorted({int(run.frames) for run in found if run.finished and run.frames})
            per_seed = ", ".join(f"{value:.3f}" for _, value in sorted(done.items()))
            lines.append(f"| {env} | {agent} | {len(done)} | "
                         f"{', '.join(f'{f:,}' for f in frames)} | {per_seed} | "
                         f"{iqm_estimate(list(done.values()))} | {paper_cell} |")
    return lines


def improvement(runs: Sequence[Run], ours: str = OURS, reference: str = REFERENCE) -> list[str]:
    """Per env: both IQMs, whether ``ours``' is at least ``reference``'s (issue 30's measure,
    decided on the unrounded IQMs) and P(``ours`` > ``reference``); then the envs where it is,
    and P over the envs both have, with 95% CIs."""
    lines = [f"| env | seeds ({ours} / {reference}) | IQM {ours} | IQM {reference} | "
             f"{ours} ≥ {reference} (IQM) | P({ours} > {reference}) [95% CI] |",
             "|---|---:|---:|---:|---|---|"]
    both, at_least = [], 0
    for env in envs_of(runs):
        x, y = scores(runs, env, ours), scores(runs, env, reference)
        if not x or not y:
            lines.append(f"| {env} | {len(x)} / {len(y)} | | | | not run |")
            continue
        both.append(env)
        iqm_x, iqm_y = iqm(list(x.values())), iqm(list(y.values()))
        holds = iqm_x >= iqm_y
        at_least += holds
        estimate = probability_of_improvement_estimate(list(x.values()), list(y.values()))
        lines.append(f"| {env} | {len(x)} / {len(y)} | {iqm_x:.3f} | {iqm_y:.3f} | "
                     f"{'yes' if holds else 'no'} | {estimate} |")
    x_all = matrix({env: scores(runs, env, ours) for env in both}, both)
    y_all = matrix({env: scores(runs, env, reference) for env in both}, both)
    if x_all is None or y_all is None:
        lines.append("| **all envs** | — | | | | not run |")
    else:
        estimate = probability_of_improvement_estimate(x_all, y_all)
        lines.append(f"| **all {len(both)} envs** | {x_all.shape[0]} / {y_all.shape[0]} | | | "
                     f"**{at_least} of {len(both)}** | **{estimate}** |")
    return lines


def summary(runs: Sequence[Run]) -> list[str]:
    """Each agent's IQM over every (seed, env) score of the envs it has finished runs on."""
    lines = ["| agent | envs | seeds | IQM over envs × seeds [95% CI] | mean MMER |",
             "|---|---:|---:|---|---:|"]
    for agent in agents_of(runs):
        by_env = {env: scores(runs, env, agent) for env in envs_of(runs)}
        envs = [env for env, values in by_env.items() if values]
        table = matrix(by_env, envs)
        if table is None:
            lines.append(f"| {agent} | 0 | 0 | not run | — |")
            continue
        lines.append(f"| {agent} | {len(envs)} | {table.shape[0]} | {iqm_estimate(table)} | "
                     f"{table.mean():.3f} |")
    return lines


def write_csv(runs: Sequence[Run], path: Path) -> None:
    """``mmer.csv``: one row per run found."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["env", "agent", "seed", "frames", "budget", "finished", "superseded",
                     "mmer"])
    for run in runs:
        writer.writerow([run.env, run.agent, run.seed,
                         "" if run.frames is None else int(run.frames),
                         "" if run.budget is None else run.budget, int(run.finished),
                         int(run.superseded), "" if run.mmer is None else f"{run.mmer:.6f}"])
    path.write_text(buffer.getvalue())


TEMPLATE = HERE / "RESULTS.template.md"
"""The text of the suite's own table, at :data:`~experiments.popgym.suite.FRAMES` a run, with
its reading written by hand."""
BUDGET_TEMPLATE = HERE / "RESULTS.budget.template.md"
"""The text of a table at another budget (``suite.py --frames``), which names its frames and
has no reading yet."""


def budgets(runs: Sequence[Run]) -> list[int]:
    """The frame budgets the runs' configs give, in order."""
    return sorted({run.budget for run in runs if run.budget is not None})


def template_for(runs: Sequence[Run]) -> Path:
    """:data:`TEMPLATE` for runs at the suite's own budget (or none yet), else
    :data:`BUDGET_TEMPLATE`: the first one's text and reading speak of 163,840 frames."""
    return TEMPLATE if set(budgets(runs)) <= {FRAMES} else BUDGET_TEMPLATE


def render(runs: Sequence[Run], template: str) -> str:
    """``template`` with its tables filled in from ``runs``, and their budgets."""
    return (template.replace("{{per_env}}", "\n".join(per_env(runs)))
            .replace("{{improvement}}", "\n".join(improvement(runs)))
            .replace("{{summary}}", "\n".join(summary(runs)))
            .replace("{{frames}}", " and ".join(f"{budget:,}" for budget in budgets(runs))))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=RUNS, help="the suite's run directories")
    parser.add_argument("--out", type=Path, default=HERE,
                        help="where RESULTS.md and mmer.csv go")
    args = parser.parse_args(argv)
    runs = collect(args.runs) if args.runs.exists() else []
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(runs, args.out / "mmer.csv")
    text = render(runs, template_for(runs).read_text())
    (args.out / "RESULTS.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

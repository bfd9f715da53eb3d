"""The figures that the hand-written reading in ``RESULTS.template.md`` quotes and its tables
do not show.

    python -m experiments.popgym.reading [--runs DIR] [--before CSV]

- **Runs that end lower than they began**, per env and agent: of the finished runs that count
  (today's preset, as in the tables), those whose last counted point of the 100-episode mean
  is below their first (a point counts once 100 episodes have ended, as for the MMER,
  :mod:`experiments.popgym.mmer`). Where most runs do, nothing was learnt in the budget, and
  the MMER is the highest of noisy points.
- **Seed by seed against an earlier ``mmer.csv``** (``--before``): for each agent, how many of
  the (env, seed) runs finished in both files score higher today, lower, or the same at three
  decimals, the precision of the tables. For the runs of an earlier preset, give the file as it
  was committed then, e.g. ``git show 9bf6c98:experiments/popgym/mmer.csv > before.csv``.
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from experiments.popgym.aggregate import HERE, Run, agents_of, collect, envs_of
from experiments.popgym.suite import RUNS

DECIMALS = 3
"""The precision at which two MMERs count as the same: that of RESULTS.md's tables."""


def ends_lower(runs: Sequence[Run], env: str, agent: str) -> tuple[int, int]:
    """``(k, n)``: ``k`` of the ``n`` finished, current runs of ``agent`` on ``env`` whose last
    counted point is below their first."""
    counted = [run.counted for run in runs if run.env == env and run.agent == agent
               and run.finished and not run.superseded and run.counted]
    return sum(points[-1] < points[0] for points in counted), len(counted)


def finished_scores(path: Path) -> dict[tuple[str, str, int], float]:
    """The MMER of each finished, current run in an ``mmer.csv``, by (env, agent, seed).

    A file from before the ``superseded`` column (as at 9bf6c98) counts every finished run:
    it was written before any preset changed, so each of its runs was made with the preset of
    its day, the one it is compared as.

    Raises:
        ValueError: the file lacks a column that every ``mmer.csv`` has had.
    """
    with path.open(newline="") as file:
        rows = csv.DictReader(file)
        missing = {"env", "agent", "seed", "finished", "mmer"} - set(rows.fieldnames or ())
        if missing:
            raise ValueError(f"{path} has no column {', '.join(sorted(missing))}: it is no "
                             "mmer.csv of experiments.popgym.aggregate")
        return {(row["env"], row["agent"], int(row["seed"])): float(row["mmer"])
                for row in rows
                if row["finished"] == "1" and row.get("superseded", "0") == "0" and row["mmer"]}


def seed_by_seed(before: dict[tuple[str, str, int], float],
                 after: dict[tuple[str, str, int], float]) -> dict[str, Counter[str]]:
    """Per agent, the count of runs in both that score ``higher``, ``lower`` or the ``same``
    in ``after`` as in ``before``, at :data:`DECIMALS`."""
    counts: dict[str, Counter[str]] = {}
    for key in sorted(before.keys() & after.keys()):
        old, new = round(before[key], DECIMALS), round(after[key], DECIMALS)
        verdict = "higher" if new > old else "lower" if new < old else "same"
        counts.setdefault(key[1], Counter())[verdict] += 1
    return counts


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=RUNS, help="the suite's run directories")
    parser.add_argument("--before", type=Path,
                        help="an earlier mmer.csv, to compare today's runs with seed by seed")
    parser.add_argument("--after", type=Path, default=HERE / "mmer.csv",
                        help="today's mmer.csv (the aggregate's)")
    args = parser.parse_args(argv)
    runs = collect(args.runs) if args.runs.exists() else []
    print("| env | agent | runs that end lower than they began |\n|---|---|---|")
    for env in envs_of(runs):
        for agent in agents_of(runs):
            k, n = ends_lower(runs, env, agent)
            if n:
                print(f"| {env} | {agent} | {k} of {n} |")
    if args.before is not None:
        print(f"\n| agent | higher | lower | same (at {DECIMALS} decimals) |\n|---|---|---|---|")
        counts = seed_by_seed(finished_scores(args.before), finished_scores(args.after))
        for agent, count in counts.items():
            print(f"| {agent} | {count['higher']} | {count['lower']} | {count['same']} |")


if __name__ == "__main__":
    main()

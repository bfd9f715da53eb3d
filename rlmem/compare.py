"""Compare runs: ``python -m rlmem.compare RUN_OR_GLOB... [--threshold X] [--plot FILE]``.

    python -m rlmem.compare runs/ppo/MemoryS7
    python -m rlmem.compare 'runs/ppo/MemoryS7/*/seed*' --threshold 0.94 --plot s7.png --profile
    python -m rlmem.compare runs/supervised/copy --measure ce

Reads the run folders of rlmem.train (our PPO and agent=sb3) and rlmem.supervised
(rlmem.comparison.collection), groups them by setting (the config minus the seed, the budget
and where the run lives), and prints per env or task a table of the final measure: each
group's seeds, how many reach --threshold, the interquartile mean (IQM) with its 95%
stratified bootstrap interval, and the probability of improvement between groups
(rlmem.stats, after Agarwal et al., 2021). --plot draws the learning curves; --profile adds
the performance profiles.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rlmem.comparison.collection import NotARunError, group_runs, read_run, run_folders
from rlmem.comparison.figures import write_comparison_figure
from rlmem.comparison.table import comparison_table
from rlmem.runs.logger import CorruptProgressError


def parser() -> argparse.ArgumentParser:
    """The command line's options."""
    options = argparse.ArgumentParser(
        prog="python -m rlmem.compare", description=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Examples:\n" + "\n".join(__doc__.split("\n\n")[1].splitlines())
        + "\n\nTensorBoard shows the same runs' logged curves: tensorboard --logdir runs")
    options.add_argument("runs", nargs="+", metavar="RUN_OR_GLOB",
                         help="a run folder, a folder holding runs at any depth, or a glob of "
                              "them (quote a glob so that Python expands it, with ** too)")
    options.add_argument("--threshold", type=float, default=None,
                         help="count the seeds whose final measure reaches this (at least it, "
                              "or at most it for a loss, cross-entropy or MSE): k of n")
    options.add_argument("--measure", default=None,
                         help="what to compare: a progress.csv column of an RL run (default "
                              "return_recent, the mean return of the last 100 episodes), or a "
                              "supervised task's metric, at its T or another (accuracy, ce, "
                              "mse, accuracy@T200; default: the task's score at its T)")
    options.add_argument("--plot", type=Path, default=None, metavar="FILE",
                         help="draw the learning curves (IQM over seeds, shaded 95%% CI) into "
                              "FILE (.png, .pdf or .svg)")
    options.add_argument("--profile", action="store_true",
                         help="with --plot: add each group's performance profile (the fraction "
                              "of runs above each threshold, with its 95%% CI)")
    options.add_argument("--reps", type=int, default=2000,
                         help="bootstrap resamples of each interval (default 2000)")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    """The command: print the table (and write the figure); 2 when nothing can be compared."""
    options = parser()
    args = options.parse_args(argv)
    if args.profile and args.plot is None:
        options.error("--profile draws into the figure: give --plot FILE too")
    if args.reps < 1:
        options.error("--reps must be at least 1")
    try:
        runs = [read_run(path, args.measure) for path in run_folders(args.runs)]
    except (NotARunError, CorruptProgressError) as error:
        print(f"rlmem.compare: error: {error}. Nothing was compared.", file=sys.stderr)
        return 2
    groups = group_runs(runs)
    print(f"{len(runs)} runs in {len(groups)} settings")
    print(comparison_table(groups, args.threshold, args.reps))
    if args.plot is not None:
        print(f"figure: {write_comparison_figure(groups, args.plot, args.profile)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Does ``vectorization=async`` learn as ``sync`` does? lstm on MemoryS7 and DoorKey-5x5, three
seeds each, every other setting the suites' own.

    python -m experiments.async_learning.check             # train what is left, then RESULTS.md
    python -m experiments.async_learning.check --no-train  # RESULTS.md from the runs there are

``auto`` steps the envs in worker processes from 4 cores (:mod:`rlmem.envs.vectorization`), so
a user's run on a larger machine is an async run: it must reach what the suites' sync runs
reach. Async acts for the two groups of envs apart, so its actions draw their random numbers in
another order and a run of a seed is not the sync run of that seed, only another sample of the
same learning. The check trains the suites' runs again with ``vectorization=async`` into
``runs/`` here (the memory suite's stop rule and evaluation on MemoryS7 and MemoryS13; the
transfer suite's 500k frames and evaluation on DoorKey-5x5 and DoorKey-16x16) and sets them
beside the sync runs committed in ``experiments/memory/runs`` and ``experiments/transfer/runs``.
Three seeds can show a difference as large as the seeds' spread, not prove there is none.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.common.evaluations import suite_evaluation
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.memory import suite as memory_suite
from experiments.transfer import suite as transfer_suite
from rlmem.runs import INTERRUPTED
from rlmem.runs.progress import read_progress

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
OUTPUT = HERE / "RESULTS.md"
EXPERIMENTS = HERE.parent
SEEDS = (0, 1, 2)
ASYNC = "vectorization=async"


@dataclass(frozen=True)
class Case:
    """One env's check: where its sync runs are, how to train its async ones."""

    env: str
    target: str
    """The env its runs are also evaluated on (zero-shot)."""
    sync_root: Path
    train: Callable[[Path, bool], int]
    """Trains (unless told not to) and evaluates the async runs under a root (each in
    ``<root>/<env>/lstm/seed<k>``, as the suite lays out its own); its exit code."""


def _memory(root: Path, train: bool) -> int:
    return memory_suite.main(["--memories", "lstm", "--seeds", str(len(SEEDS)),
                              *(["--no-train"] if not train else []),
                              "--runs", str(root), "--", ASYNC])


def _transfer(root: Path, train: bool) -> int:
    return transfer_suite.main(["--envs", "DoorKey-5x5", "--memories", "lstm",
                                "--seeds", *map(str, SEEDS),
                                *(["--no-train"] if not train else []),
                                "--runs", str(root), "--", ASYNC])


CASES = (
    Case("MemoryS7", "MemoryS13", EXPERIMENTS / "memory" / "runs", _memory),
    Case("DoorKey-5x5", "DoorKey-16x16", EXPERIMENTS / "transfer" / "runs", _transfer),
)


def row(run: Path, case: Case) -> list[str] | None:
    """The frames a run trained, its final recent return and its evaluations' mean returns
    (None: not trained)."""
    progress = run / "progress.csv"
    if not progress.exists():
        return None
    last = read_progress(progress)[-1]
    cells = [f"{int(last.number('frames')):,}", f"{last.number('return_recent'):.3f}"]
    for env in (case.env, case.target):
        report = suite_evaluation(run, env)
        cells.append("—" if report is None else f"{report['return_mean']:.3f}")
    return cells


def table(case: Case, root: Path) -> list[str]:
    lines = [f"### lstm on {case.env} (evaluated on {case.env} and {case.target})", "",
             f"| seed | vectorization | frames trained | recent return at the end | "
             f"{case.env} return | {case.target} return |", "|---|---|---:|---:|---:|---:|"]
    means: dict[str, list[list[float]]] = {"sync": [], "async": []}
    for seed in SEEDS:
        for mode, base in (("sync", case.sync_root), ("async", root)):
            cells = row(base / case.env / "lstm" / f"seed{seed}", case)
            lines.append(f"| {seed} | {mode} | " + (" | ".join(cells) if cells else
                                                   "not run | — | — | —") + " |")
            if cells and "—" not in cells:
                means[mode].append([float(cell.replace(",", "")) for cell in cells])
    for mode, values in means.items():
        if len(values) == len(SEEDS):
            columns = [statistics.fmean(column) for column in zip(*values, strict=True)]
            lines.append(f"| mean | {mode} | {columns[0]:,.0f} | " + " | ".join(
                f"{value:.3f}" for value in columns[1:]) + " |")
    return [*lines, ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-train", action="store_true", help="only evaluate, then write")
    parser.add_argument("--runs", type=Path, default=RUNS)
    args = parser.parse_args(argv)
    status = 0
    for case in CASES:
        status = max(status, case.train(args.runs.resolve(), not args.no_train))
        if status == INTERRUPTED:  # Ctrl-C: the suite's runs stopped at their checkpoint
            return status
    lines = ["# Async against sync: the same learning?", "",
             "Generated by `python -m experiments.async_learning.check` (see its docstring). "
             "Sync: the suites' committed runs; async: the same commands with "
             f"`{ASYNC}`.", ""]
    for case in CASES:
        lines += table(case, args.runs.resolve())
    OUTPUT.write_text("\n".join(lines))
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    exit_passing_signals_on(main)

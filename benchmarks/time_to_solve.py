"""Time to solve: wall seconds (and frames) until a run's return reaches a threshold, our PPO
now (``agent.preset=fast env_backend=tensor``) against a pinned reference commit with its own
defaults, per env and cell, over seeds, alternating.

    python benchmarks/time_to_solve.py --seeds 3 4 5 6 7              # issue 59's acceptance
    python benchmarks/time_to_solve.py --processes 2 --runs /tmp/tts2 # the new side on 2 cores
    python benchmarks/time_to_solve.py --new-overrides agent.compiled_lstm=true --runs /tmp/ttsc
    python benchmarks/time_to_solve.py --envs DoorKey-5x5 --memories lstm --seeds 3 \\
        --frames 8192 --threshold 0.0 --runs /tmp/tts                # a smoke test

Every run is a whole ``python -m rlmem.train`` process with ``stop_return`` (the mean return
of the last 1,000 episodes, checked after each update) and a frame cap; its wall time counts
start-up, env making and checkpoints, as a researcher's does. The reference runs the code of
``--reference`` (default f7a96db, issue 59's start), from ``git archive`` of that commit
(:func:`experiments.fast_trainer.solve_runs.packaged_commit`), with its own defaults and only
the env, cell, seed, frames and ``stop_return`` given; the new side runs this checkout. For
each seed the two run one after the other, the first of the pair alternating from seed to
seed, so that the load of a shared machine hits both alike; the load average before and after
each run is recorded. The new side, too, runs a ``git archive`` of a commit (``--new``, default
the checkout's ``HEAD``, named in the report), so that editing the checkout while the benchmark
runs changes nothing it measures. Runs are kept (``--runs``, each with its ``solve.json``) and
a stopped benchmark resumes. The report gives, per env and cell, every seed's seconds and
frames, their IQM with a 95% stratified bootstrap interval (:mod:`rlmem.stats`), k of n solved,
the ratio of the IQMs of seconds, and the probability that a new run solves faster than a
reference run, with its interval. A run that did not reach the threshold counts at its cap (its
seconds and frames are then lower bounds, marked ``+``).

Run the test seeds (3-7) only for a measurement: the fast preset was tuned on 0-2
(``experiments/fast_trainer/TUNING.md``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
NEW = ("agent.preset=fast", "env_backend=tensor")
"""What the new side adds to the command line."""
SIDES = ("reference", "new")


def _modules() -> tuple[Any, Any, Any]:
    """The checkout's run helpers, the report's layout and the statistics (imported from the
    repository's root: this script runs as ``python benchmarks/time_to_solve.py``)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from experiments.common import report
    from experiments.fast_trainer import solve_runs
    from rlmem import stats

    return solve_runs, report, stats


def run_pair(args: argparse.Namespace, env: str, memory: str, seed: int, index: int,
             code: dict[str, Path]) -> dict[str, Any]:
    """The reference's and the new run of one env, cell and seed, the first of the two
    alternating with ``index``; ``code`` holds each side's packaged commit."""
    solve_runs, _, _ = _modules()
    base = [f"env={env}", f"memory={memory}", f"seed={seed}", f"frames={args.frames}",
            f"stop_return={args.threshold}"]
    plans = {"reference": (base, code["reference"]), "new": ([*base, *new_side(args)],
                                                             code["new"])}
    order = SIDES if index % 2 == 0 else SIDES[::-1]
    return {side: solve_runs.train_to_threshold(
        plans[side][0], args.runs / side / env / memory / f"seed{seed}", plans[side][1])
        for side in order}


def new_side(args: argparse.Namespace) -> list[str]:
    """What the new side adds to the command line: :data:`NEW`, ``agent.processes`` where
    more than one is asked for (``--processes``), and ``--new-overrides``."""
    return [*NEW, *([f"agent.processes={args.processes}"] if args.processes > 1 else []),
            *args.new_overrides]


def _side_cells(solves: list[Any], report: Any) -> list[str]:
    """Seconds per seed, their IQM [CI], frames' IQM [CI], and k of n solved."""
    seconds = [solve.wall_s for solve in solves]
    frames = [float(solve.frames) for solve in solves]

    def mark(value: float, solve: Any, show: Any) -> str:
        return show(value) + ("" if solve.reached else "+")

    return [", ".join(mark(s, solve, lambda v: f"{v:.0f}") for s, solve in zip(seconds, solves,
                                                                               strict=True)),
            report.iqm_ci(seconds, lambda v: f"{v:.0f}"),
            report.iqm_ci(frames, lambda v: f"{v / 1000:.0f}k"),
            report.count(sum(solve.reached for solve in solves), len(solves))]


def table(results: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    """The report: one row per env and cell."""
    _, report, stats = _modules()
    header = ["env", "cell"] + [f"{side} {what}" for side in SIDES for what in
                                ("seconds per seed", "seconds IQM [95% CI]",
                                 "frames IQM [95% CI]", "solved")] + [
        "speed-up (IQM seconds)", "P(new faster) [95% CI]"]
    rows = []
    for (env, memory), pairs in results.items():
        cells = [env, memory]
        for side in SIDES:
            cells += _side_cells([pair[side] for pair in pairs], report)
        ratio = (stats.iqm([pair["reference"].wall_s for pair in pairs])
                 / stats.iqm([pair["new"].wall_s for pair in pairs]))
        faster = report.improvement([pair["reference"].wall_s for pair in pairs],
                                    [pair["new"].wall_s for pair in pairs])
        rows.append([*cells, f"{ratio:.2f}×", faster])
    loads = [value for pairs in results.values() for pair in pairs for solve in pair.values()
             for value in (solve.load_before, solve.load_after)]
    return ("\n".join(report.table(header, rows)) + "\n\nLoad average (1 minute) before "
            f"and after the runs: {min(loads):.2f} to {max(loads):.2f}.\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["DoorKey-5x5", "MemoryS7"])
    parser.add_argument("--memories", nargs="+", default=["lstm", "relstm"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[3, 4, 5, 6, 7])
    parser.add_argument("--frames", type=int, default=2_000_000, help="each run's cap")
    parser.add_argument("--threshold", type=float, default=0.9, help="stop_return")
    parser.add_argument("--reference", default="f7a96db", help="the reference commit")
    parser.add_argument("--new", default="HEAD", help="the commit of the new side")
    parser.add_argument("--processes", type=int, default=1,
                        help="the new side's agent.processes (the reference runs in one)")
    parser.add_argument("--new-overrides", nargs="+", default=[], metavar="KEY=VALUE",
                        help="more overrides for the new side (e.g. agent.compiled_lstm=true)")
    parser.add_argument("--runs", type=Path, default=REPO / "benchmarks" / "time_to_solve_runs")
    parser.add_argument("--output", type=Path, default=None, help="write the report here too")
    args = parser.parse_args(argv)
    solve_runs, _, _ = _modules()
    new = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.new],
                         check=True, capture_output=True, text=True).stdout.strip()
    code = {"reference": solve_runs.packaged_commit(REPO, args.reference,
                                                    args.runs / "reference_code"),
            "new": solve_runs.packaged_commit(REPO, new, args.runs / f"new_code_{new}")}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for env in args.envs:
        for memory in args.memories:
            results[env, memory] = [run_pair(args, env, memory, seed, index, code)
                                    for index, seed in enumerate(args.seeds)]
            print(f"{env} {memory}: {results[env, memory]}", flush=True)
    text = (f"Reference {args.reference} (its defaults) against {new} with "
            f"{' '.join(new_side(args))}; stop_return={args.threshold}, cap {args.frames} "
            f"frames, seeds {', '.join(map(str, args.seeds))}.\n\n" + table(results))
    print(text)
    if args.output is not None:
        args.output.write_text(text)


if __name__ == "__main__":
    main()

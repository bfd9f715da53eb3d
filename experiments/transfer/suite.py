"""The ReLSTM paper's MiniGrid transfer table (Table 3): train small, evaluate large.

    python -m experiments.transfer.suite                          # everything, 1 local job
    python -m experiments.transfer.suite --envs DoorKey-5x5 --memories lstm relstm
    python -m experiments.transfer.suite --jobs 2 --seeds 0 1
    python -m experiments.transfer.suite --dry-run                # the commands, where runs stand
    python -m experiments.transfer.suite --runs /scratch/transfer  # runs in another folder
    python -m experiments.transfer.suite -- hydra/launcher=submitit_slurm \\
        hydra.launcher.partition=gpu hydra.launcher.timeout_min=600 device=cuda

For each train env, one Hydra multirun of ``python -m rlmem.train`` trains every memory with
every seed (the joblib launcher by default; any Hydra launcher override after ``--`` sends the
same sweep to a cluster), then every run is evaluated for ``--episodes`` episodes on its own
train env and on its paired large env with ``python -m rlmem.evaluate``.

Every step is resumable and skips finished work: a trained run resumes from its checkpoint and
returns at once when it has its frames, a finished run kept without its checkpoint is not
started (``experiments/README.md``), and an evaluation whose JSON already exists for the run's
final frame count is not repeated. So the suite can be run over several sittings, and
``python -m experiments.transfer.aggregate`` tabulates whatever is finished. Runs go to
``runs/<env>/<memory>/seed<k>/`` (``--runs`` names another folder). A run another process holds
(another suite, a run started by hand) is skipped, not failed, and so is its evaluation
(:mod:`experiments.common.suite_runs`); the suite exits with status 1 only when a run or an
evaluation failed, and with 130 after Ctrl-C, once its runs have stopped at their checkpoint.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from experiments.common.outcome import Outcome
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.common.suite_runs import (
    PlannedRun,
    add_run_arguments,
    evaluate_step,
    print_dry_run,
    reported,
    sweep_groups,
    train_command,
    train_step,
)
from experiments.common.sweep import run_dirs, runs_by_seed, train_sweep
from rlmem.envs import transfer_target
from rlmem.runs import INTERRUPTED

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"

FRAMES: dict[str, int] = {
    # The paper trained 5M frames per env; this shared 2-core CPU affords a fraction of that.
    # Our PPO solves DoorKey-5x5 in ~50-100k frames; 500k gives the agents time to settle
    # before the zero-shot test on DoorKey-16x16, the paper's key claim. MemoryS7 is trained
    # by experiments/memory/suite.py (up to 1M frames); the others get DoorKey's 500k too (a
    # run started at the earlier 100k resumes to it).
    "DoorKey-5x5": 500_000,
    "RedBlueDoors-6x6": 500_000,
    "GoToObject-6x6-N2": 500_000,
    "GoToDoor-5x5": 500_000,
    "Fetch-5x5-N2": 500_000,
}
"""Total training frames per train env."""

PAPER_MEMORIES = ("lstm", "memlstm", "relstm")
OUR_MEMORIES = ("gru", "tarnn", "sarnn", "irnn", "ernn")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=list(FRAMES), choices=list(FRAMES))
    parser.add_argument("--memories", nargs="+", default=[*PAPER_MEMORIES, *OUR_MEMORIES])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    add_train_evaluate_arguments(parser, RUNS, None,
                                 "override every env's budget (e.g. for a quick check)")
    args = parser.parse_args(argv)
    root = args.runs.resolve()
    if args.dry_run:
        for env in args.envs:
            frames = args.frames or FRAMES[env]
            print_dry_run([PlannedRun(f"{env} {memory} seed {seed}", run_dir, frames, None,
                                      train_command(root, env, memory, seed, frames,
                                                    args.overrides))
                           for memory in args.memories for seed in args.seeds
                           for run_dir in run_dirs(root, env, [memory], [seed])],
                          [env, transfer_target(env)], args.episodes, train=not args.no_train)
        return 0
    failed = []
    for env in args.envs:
        if not args.no_train:
            outcome = reported(env, train_step(partial(
                train, root, env, args.memories, args.seeds, args.frames or FRAMES[env],
                args.jobs, args.overrides)))
            if outcome is Outcome.interrupted:
                return INTERRUPTED
            if outcome is Outcome.failed:  # its error is printed above; go on to the next
                failed.append(env)
                continue
        for command, ended in evaluate_step(run_dirs(root, env, args.memories, args.seeds),
                                            [env, transfer_target(env)], args.episodes,
                                            args.jobs, budget=args.frames or FRAMES[env]):
            outcome = reported(f"{env}: {' '.join(command[3:5])}", ended)
            if outcome is Outcome.interrupted:
                return INTERRUPTED
            if outcome is Outcome.failed and env not in failed:
                failed.append(env)
    if failed:
        print(f"transfer suite: {', '.join(failed)} failed (see above); the rest are done",
              file=sys.stderr, flush=True)
        return 1
    return 0


def add_train_evaluate_arguments(parser: argparse.ArgumentParser, runs: Path,
                                 frames: int | None, frames_help: str) -> None:
    """The arguments of a suite that trains then evaluates (this one and
    :mod:`experiments.transfer.kerg2020_code`), after its own: ``--jobs``, ``--episodes``,
    ``--frames`` (default ``frames``), ``--no-train`` and
    :func:`~experiments.common.suite_runs.add_run_arguments`."""
    parser.add_argument("--jobs", type=int, default=1,
                        help="parallel local training runs (joblib) and evaluations")
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--frames", type=int, default=frames, help=frames_help)
    parser.add_argument("--no-train", action="store_true", help="only evaluate finished runs")
    add_run_arguments(parser, runs, "every training run")


def train(root: Path, env: str, memories: Sequence[str], seeds: Sequence[int], frames: int,
          jobs: int, overrides: Sequence[str]) -> None:
    """Train (or resume) every memory × seed on ``env``: one sweep, or one per set of seeds
    left when some runs are finished without their checkpoint, which are left as they are
    (:func:`~experiments.common.suite_runs.startable`), and one per set that starts again from
    zero, trained part-way without it (:func:`~experiments.common.suite_runs.sweep_groups`).
    Every sweep runs; the first that failed is raised at the end."""
    sweeps: dict[tuple[tuple[int, ...], tuple[str, ...]], list[str]] = {}
    for memory in memories:
        for chosen, again in sweep_groups(runs_by_seed(root, env, memory, seeds), frames):
            sweeps.setdefault((tuple(chosen), again), []).append(memory)
    failure: subprocess.CalledProcessError | None = None
    for (sweep_seeds, again), group in sweeps.items():
        try:
            train_sweep(root, env, group, list(sweep_seeds), frames, jobs, [*overrides, *again])
        except subprocess.CalledProcessError as error:
            failure = failure or error
    if failure is not None:
        raise failure


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""The ReLSTM authors' own RL code path, replicated (issue 58): DoorKey-5x5 -> DoorKey-16x16.

    python -m experiments.transfer.kerg2020_code                   # every run, 1 local job
    python -m experiments.transfer.kerg2020_code --dry-run         # the commands, where runs stand
    python -m experiments.transfer.kerg2020_code --memories relstm --seeds 0 1 --jobs 2
    python -m experiments.transfer.kerg2020_code --frames 4096 --episodes 2 --runs /tmp/k  # smoke

relstm with ``+recipe=kerg2020_code`` (the authors' code path: ``memory.reset_rule`` and
``memory.readout`` ``authors_code``, ν = ρ = 5, the raw grid floats, the forget gate's bias 0)
and lstm with ``+recipe=kerg2020_code_lstm`` (torch's ``nn.LSTMCell`` initialisation, the raw
grid floats), each on :data:`SEEDS`, the seeds of the 5M-frame runs of ``runs_5M/``, for
:data:`FRAMES` frames on DoorKey-5x5: a Hydra multirun of ``python -m rlmem.train`` for
every ``--jobs`` seeds of a memory, each batch evaluated before the next trains (a run takes
most of an hour of one core, so a sitting scores what it finished). Every run is evaluated on
DoorKey-5x5 and DoorKey-16x16 twice, for ``--episodes`` episodes with sampled actions: as we
evaluate (a fixed share of the episodes per env,
``python -m rlmem.evaluate``'s default) and as the authors do (rl-starter-files'
``scripts/evaluate.py``: the first episodes to end over 16 envs, ``first_to_end=true``).

Every step is resumable and skips finished work, as in :mod:`experiments.transfer.suite`: a run
resumes from its checkpoint, a finished one returns at once, an evaluation whose JSON exists for
the run's final frames is not repeated. Runs go to ``runs_kerg2020_code/DoorKey-5x5/<memory>/
seed<k>/`` (``--runs`` names another folder); ``python -m experiments.transfer.aggregate``
tabulates whatever is finished.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from experiments.common import suite_runs
from experiments.common.outcome import Outcome
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.common.sweep import run_dirs, runs_by_seed, train_sweep
from experiments.transfer.suite import add_train_evaluate_arguments
from rlmem.envs import transfer_target
from rlmem.runs import INTERRUPTED

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs_kerg2020_code"
ENV = "DoorKey-5x5"
FRAMES = 5_001_216
"""The paper's 5M frames as whole updates of 16 envs × 128 frames, as ``runs_5M/``."""
SEEDS = (0, 1, 2, 3, 4)
"""The seeds of ``runs_5M/``, the runs of our relstm and lstm these are compared with."""
RECIPES = {"relstm": "+recipe=kerg2020_code", "lstm": "+recipe=kerg2020_code_lstm"}
"""Each memory's recipe: the authors' code path for their cell and for their baseline."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", nargs="+", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    add_train_evaluate_arguments(parser, RUNS, FRAMES,
                                 "override the budget (e.g. for a quick check)")
    args = parser.parse_args(argv)
    root = args.runs.resolve()
    envs = [ENV, transfer_target(ENV)]
    if args.dry_run:
        planned = [suite_runs.PlannedRun(
            f"{memory} seed {seed}", run_dir, args.frames, None, suite_runs.train_command(
                root, ENV, memory, seed, args.frames, [RECIPES[memory], *args.overrides]))
            for memory in args.memories for seed in args.seeds
            for run_dir in run_dirs(root, ENV, [memory], [seed])]
        suite_runs.print_dry_run(planned, envs, args.episodes, train=not args.no_train)
        return 0
    failed = False
    for memory in args.memories:
        left = [] if args.no_train else suite_runs.seeds_to_start(
            runs_by_seed(root, ENV, memory, args.seeds), args.frames)
        for batch in suite_runs.batches(left, args.jobs):  # each scored before the next trains
            outcome = suite_runs.reported(f"{ENV} {memory}", suite_runs.train_step(partial(
                train, root, memory, batch, args.frames, args.jobs, args.overrides)))
            if outcome is Outcome.interrupted:
                return INTERRUPTED
            if outcome is Outcome.failed:  # its error is printed above; the rest of the memory
                failed = True             # waits for the next sitting
                break
            outcome = evaluate(root, memory, batch, envs, args)
            if outcome is Outcome.interrupted:
                return INTERRUPTED
            failed |= outcome is Outcome.failed
        # the runs trained in an earlier sitting (or by hand), not yet evaluated
        outcome = evaluate(root, memory, args.seeds, envs, args)
        if outcome is Outcome.interrupted:
            return INTERRUPTED
        failed |= outcome is Outcome.failed
    if failed:
        print("kerg2020_code: a run or an evaluation failed (see above); the rest are done",
              file=sys.stderr, flush=True)
        return 1
    return 0


def train(root: Path, memory: str, seeds: Sequence[int], frames: int, jobs: int,
          overrides: Sequence[str]) -> None:
    """Train (or resume) ``memory`` with its recipe on ``seeds``: one sweep, and one more for
    the runs that start again from zero (:func:`~experiments.common.suite_runs.sweep_groups`)."""
    for chosen, again in suite_runs.sweep_groups(runs_by_seed(root, ENV, memory, seeds),
                                                 frames):
        train_sweep(root, ENV, [memory], chosen, frames, jobs,
                    [RECIPES[memory], *overrides, *again])


def evaluate(root: Path, memory: str, seeds: Sequence[int], envs: Sequence[str],
             args: argparse.Namespace) -> Outcome:
    """Evaluate the finished runs of ``memory`` at ``seeds`` that lack an up-to-date result on
    ``envs``, as we count episodes and as the authors do: interrupted when one evaluation was,
    failed when one failed (the rest are still made), else done."""
    failed = False
    runs = run_dirs(root, ENV, [memory], seeds)
    for first_to_end in (False, True):
        for command, ended in suite_runs.evaluate_step(runs, envs, args.episodes, args.jobs,
                                                       first_to_end, budget=args.frames):
            outcome = suite_runs.reported(f"{memory}: {' '.join(command[3:])}", ended)
            if outcome is Outcome.interrupted:
                return outcome
            failed |= outcome is Outcome.failed
    return Outcome.failed if failed else Outcome.done


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""MiniGrid's memory task: train on MemoryS7, evaluate there and zero-shot on MemoryS13.

    python -m experiments.memory.suite                         # every cell, 1 local job
    python -m experiments.memory.suite --memories lstm relstm  # some cells
    python -m experiments.memory.suite --dry-run               # the commands, where runs stand
    python -m experiments.memory.suite --runs /scratch/memory  # runs in another folder
    python -m experiments.memory.suite --jobs 2 -- hydra/launcher=submitit_slurm ...

MemoryS7 shows a cue (a key or a ball) in a small room, then a corridor ends at a key and a
ball: the agent must go to the one it saw. The cue is out of view at the fork, so an agent
without memory succeeds half the time (return about 0.47). It is the one env of the ReLSTM
paper's six where memory is needed.

Every run is ``python -m rlmem.train env=MemoryS7 memory=<cell> seed=<k>`` with the library's
defaults (hidden 64, embedded grid, forget-gate bias 1, rl-starter-files' PPO), at most
:data:`FRAMES` frames, stopping early once the mean return of the last 1000 training episodes
(about six updates) reaches :data:`STOP_RETURN`. Each run is then evaluated for
:data:`EPISODES` episodes with sampled actions on MemoryS7 and on MemoryS13. Runs go to
``runs/MemoryS7/<cell>/seed<k>/`` (``--runs`` names another folder);
``python -m experiments.memory.aggregate`` writes ``RESULTS.md``. Every step resumes and skips
finished work (see :mod:`experiments.common.sweep`), so the suite can be run over several
sittings, and a label's seeds left to train are evaluated ``--jobs`` at a time as they
finish (:func:`batches`). A run another process holds (another suite, a run started by hand) is
skipped, not failed, and so is its evaluation (:mod:`experiments.common.suite_runs`); the suite
exits with status 1 only when a run or an evaluation failed, and with 130 after Ctrl-C, once its
runs have stopped at their checkpoint.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import NamedTuple

from experiments.common.outcome import Outcome
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.common.suite_runs import (
    PlannedRun,
    add_run_arguments,
    batches,
    evaluate_step,
    print_dry_run,
    reported,
    seeds_to_start,
    sweep_groups,
    train_command,
    train_step,
)
from experiments.common.sweep import run_dirs, runs_by_seed, train_sweep
from rlmem.cells import CELLS
from rlmem.runs import CHECKPOINT_NAME, INTERRUPTED
from rlmem.runs.lock import LOCK_NAME

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
ENV, TARGET = "MemoryS7", "MemoryS13"

FRAMES = 999_424
"""The issue's budget, 1M frames, as whole updates (488 of 16 envs × 128 frames): every
headline cell must solve MemoryS7 within it."""
STOP_RETURN = 0.94
"""A solved policy returns about 0.955 (the reward falls with the steps taken); stopping once
1000 episodes average 0.94 (about 98% success) saves the frames a solved run would spend
confirming it. Lower bars stopped runs that had only just learned: with a 100-episode window
at 0.93 a GRU stopped at 0.94 evaluated at 0.82; with 1000 episodes at 0.93 a ReLSTM evaluated
at 0.87."""
EPISODES = 200
"""Evaluation episodes per env, with sampled actions."""

HEADLINE = ("lstm", "gru", "memlstm", "relstm")
""":data:`SEEDS` seeds each, as :data:`MODERN`'s; the other cells get one."""
MODERN = ("ffm", "lru", "deltanet", "gtrxl")
"""The memories the field compares against (issue 56), :data:`SEEDS` seeds each: whether each
solves MemoryS7 (0.9) within the 1M frames in at least 3 of 5 seeds."""
TRAINER = ("vectorization=sync",)
"""How every run steps and updates, pinned: MiniGrid's envs in one process, in sync, the
trainer's exact reference path. Every run of the suite before the tensor envs became the
default (``env_backend=auto``) was made that way; they equal MiniGrid's step for step but draw
other episodes from a seed, and the default trainer may change the update's arithmetic.
Pinned, the runs added later are measured as the others were."""
SEEDS = 5
"""Seeds of a headline cell (0 to 4): a claim is "k of n seeds" with n at least 5. Seeds 0-2 ran
first; 3 and 4 were added (issue 33) without changing anything else."""

class Ablation(NamedTuple):
    """A variant of one cell's run: its overrides, frame budget, seeds and stop rule (None:
    train the whole budget)."""

    memory: str
    overrides: list[str]
    frames: int = FRAMES
    seeds: int = 1
    stop_return: float | None = STOP_RETURN
    continues: str | None = None
    """The ablation of the same cell whose runs this one trains on (see
    :func:`continue_from`): a seed that ablation has starts as a copy of its run, so up to that
    run's frames they are the same run."""


PAPER_FRAMES = 5_001_216
"""The ReLSTM paper's budget, "5000000 steps on each environment" (Kerg et al. 2020, §3.3),
rounded up to whole updates (2442 of 16 envs × 128 frames)."""
VIEW3 = "+env_kwargs.agent_view_size=3"
RECIPE = "+recipe=memory_transfer"
"""``rlmem/conf/recipe/memory_transfer.yaml``: the 3×3 view, the compass heading, the paper's
5M frames (:data:`PAPER_FRAMES`) and no early stop. Each ablation passes its own frames and stop
rule, so the ``*_view3_direction`` rows are the recipe at 3M frames, and
``relstm_view3_direction_5M`` is the recipe exactly."""

ABLATIONS: dict[str, Ablation] = {
    "lstm_v0_1": Ablation("lstm", ["grid_encoding=raw", "memory.forget_bias=0.0"]),  # old recipe
    "lstm_onehot": Ablation("lstm", ["grid_encoding=onehot"]),
    "gru_update_bias1": Ablation("gru", ["memory.update_bias=1.0"]),
    "sarnn_update_bias1": Ablation("sarnn", ["memory.update_bias=1.0"]),
    "irnn_eq5": Ablation("irnn", ["memory.update_rule=eq5", "memory.learn_alpha=true"]),
    "lstm_view3": Ablation("lstm", [VIEW3], 3 * FRAMES),
    "relstm_view3": Ablation("relstm", [VIEW3], 3 * FRAMES, seeds=3),
    "relstm_view3_no_stop": Ablation("relstm", [VIEW3], 3 * FRAMES, seeds=3, stop_return=None,
                                     continues="relstm_view3"),
    "relstm_view3_direction": Ablation("relstm", [RECIPE], 3 * FRAMES, seeds=3,
                                       stop_return=None),
    "relstm_view3_direction_5M": Ablation("relstm", [RECIPE], PAPER_FRAMES, seeds=SEEDS,
                                          stop_return=None, continues="relstm_view3_direction"),
    "lstm_view3_direction": Ablation("lstm", [RECIPE], 3 * FRAMES, stop_return=None),
    "memlstm_view3_direction": Ablation("memlstm", [RECIPE], 3 * FRAMES, stop_return=None),
    "lstm_view3_direction_5M": Ablation("lstm", [RECIPE], PAPER_FRAMES, seeds=SEEDS,
                                        stop_return=None, continues="lstm_view3_direction"),
    "memlstm_view3_direction_5M": Ablation("memlstm", [RECIPE], PAPER_FRAMES, seeds=SEEDS,
                                           stop_return=None,
                                           continues="memlstm_view3_direction"),
}
"""What each part of the recipe does: the old recipe at the new budget, one-hot in place of the
embedding, the GRU analogue of the forget-gate bias (an update-gate bias of 1, which keeps
the state) for the two GRU-based cells, iRNN's earlier default (Eq. 5, α learned) beside
the paper's Eq. 8, and a 3×3 view (``agent_view_size=3``, on MemoryS7 and on MemoryS13 alike).

The 3×3 view tests why MemoryS13 fails zero-shot (``S13_BY_START.md``): with the default 7×7
view an agent at S7's fork turns and sees the cue 4 cells back, so S7 hardly asks for memory,
and S13's long corridor looks unlike anything on S7. With a 3×3 view the cue can only be seen
from inside the start room, so S7 needs the memory across the corridor, and every corridor
cell looks the same on S7 and S13. It is a harder S7 (the agent must find the cue): at 1M
frames relstm succeeded in 86% of S7 episodes, so these runs get 3M.

``relstm_view3_no_stop`` trains the same runs for the whole 3M frames: of ``relstm_view3``'s
seeds, the stop rule ended two at 1.5M and 1.9M frames, and they did worst on MemoryS13, while
the one that trained 3M did best. Stopping on S7 cannot see S13, so this asks whether the frames
after S7 is solved are what carries the policy to S13. Its runs continue ``relstm_view3``'s
(:attr:`Ablation.continues`) without the stop rule: up to the stop they are the same runs, and
after it they continue from the stopped run's weights, optimizer and RNG (the envs start new
episodes, as on any resume). Seed 0 never met the rule, so its copy is already finished.

``relstm_view3_direction`` adds MiniGrid's compass heading to the observation
(``direction=true``): the recipe ``+recipe=memory_transfer``. ``relstm_view3_no_stop`` chose
the right object in 95% of the S13 episodes that saw the cue and reached an object, but timed
out in a third of them, with a median of 219 steps to reach the fork: in a corridor a 3×3 view
looks the same facing east or west, so an agent that turns back to look for the cue cannot
tell which way it faces. The heading tells it, and leaves what there is to remember (the cue)
unchanged. ``lstm`` and ``memlstm``, the paper's two other MiniGrid cells, got the same run
(one seed each).

``relstm_view3_direction_5M`` trains ``relstm_view3_direction``'s three seeds on to the
paper's 5M frames, every seed, whatever its MemoryS13 score at 3M: ``relstm_view3_no_stop``
showed MemoryS13 success still rising with frames after MemoryS7 was solved. Its mean S13
success (79%, against 67% at 3M) made 5M the recipe's budget. Its runs continue the 3M
runs, so up to 3M they are the same runs. ``lstm_view3_direction_5M`` and
``memlstm_view3_direction_5M`` give the paper's two other cells the recipe at the same budget
and seeds, for a like-for-like comparison; their seed 0 continues the one 3M run, and seeds 1
and 2 start afresh. Issue 33 asks for the claim at 5 seeds: the three rows declare
:data:`SEEDS` (0-4), and a seed without a 3M run to continue (3 and 4 of relstm's) starts
afresh; declared seeds not yet run are named in the results, never dropped."""

REFERENCE = "sb3_lstm"
"""sb3-contrib's RecurrentPPO with its own LSTM policy (``agent=sb3 agent.policy=sb3_lstm``),
our grid encoder as features extractor, the same PPO keys and frames; one seed, no early stop
(sb3 has no ``stop_return``)."""


LABELS = [*HEADLINE, *sorted(set(CELLS) - set(HEADLINE)), REFERENCE, *ABLATIONS]
"""Every label of the suite, in the order it runs them and ``aggregate.py`` lists them."""


def seeds_of(memory: str, seeds: int) -> list[int]:
    """The seeds of a label: ``seeds`` for the headline and modern cells, an ablation's own
    count (at most ``seeds``), one for the rest."""
    if memory in HEADLINE or memory in MODERN:
        return list(range(seeds))
    return list(range(min(ABLATIONS[memory].seeds, seeds) if memory in ABLATIONS else 1))


class Sweep(NamedTuple):
    """How a label trains: the cell, the frames, the overrides and the directory label."""

    memory: str
    frames: int
    stop_return: float | None
    overrides: list[str]
    """With ``stop_return=`` when there is one."""
    label: str | None
    """The runs' directory label when it is not the memory's name."""


def sweep_of(memory: str, extra: list[str]) -> Sweep:
    """How the label ``memory`` (a cell, the reference or an ablation) trains, with
    :data:`TRAINER` and the suite's ``extra`` overrides."""
    if memory == REFERENCE:
        return Sweep("lstm", FRAMES, None,
                     ["agent=sb3", "agent.policy=sb3_lstm", *TRAINER, *extra], REFERENCE)
    if memory in ABLATIONS:
        ablation = ABLATIONS[memory]
        stop = [] if ablation.stop_return is None else [f"stop_return={ablation.stop_return}"]
        return Sweep(ablation.memory, ablation.frames, ablation.stop_return,
                     [*stop, *TRAINER, *ablation.overrides, *extra], memory)
    return Sweep(memory, FRAMES, STOP_RETURN,
                 [f"stop_return={STOP_RETURN}", *TRAINER, *extra], None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", nargs="+", default=LABELS, choices=LABELS,
                        help="cells, the sb3 reference and the ablations (labels of ABLATIONS)")
    parser.add_argument("--seeds", type=int, default=SEEDS,
                        help="seeds of the headline cells (and at most this many per ablation)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="parallel local training runs (joblib) and evaluations")
    parser.add_argument("--no-train", action="store_true", help="only evaluate finished runs")
    add_run_arguments(parser, RUNS, "every training run")
    args = parser.parse_args(argv)
    root = args.runs.resolve()
    if args.dry_run:
        print_dry_run([run for memory in args.memories
                       for run in planned(root, memory, seeds_of(memory, args.seeds),
                                          args.overrides)],
                      [ENV, TARGET], EPISODES, train=not args.no_train)
        return 0
    failed = []
    for memory in args.memories:  # one label at a time: a sitting's results arrive in order
        seeds = seeds_of(memory, args.seeds)
        left = [] if args.no_train else seeds_left(memory, seeds, args.overrides, root)
        for batch in batches(left, args.jobs):
            outcome = reported(memory, train_step(
                partial(train, memory, batch, args.jobs, args.overrides, runs=root)))
            if outcome is Outcome.interrupted:
                return INTERRUPTED
            if outcome is Outcome.failed:  # its error is printed above; go on to the next
                failed.append(memory)
                break
            if evaluate(memory, batch, args.jobs, root, args.overrides,
                        failed) is Outcome.interrupted:
                return INTERRUPTED
        # the runs trained in an earlier sitting (or by hand), not yet evaluated
        if memory not in failed and evaluate(memory, seeds, args.jobs, root, args.overrides,
                                             failed) is Outcome.interrupted:
            return INTERRUPTED
    if failed:
        print(f"memory suite: {', '.join(failed)} failed (see above); the rest are done",
              file=sys.stderr, flush=True)
        return 1
    return 0


def evaluate(memory: str, seeds: list[int], jobs: int, root: Path, extra: list[str],
             failed: list[str]) -> Outcome:
    """Evaluate the finished runs of ``memory`` at ``seeds`` (against its sweep's budget, with
    the suite's ``extra`` overrides) that have no up-to-date result,
    adding ``memory`` to ``failed`` when one fails; interrupted when one was."""
    for command, ended in evaluate_step(run_dirs(root, ENV, [memory], seeds),
                                        [ENV, TARGET], EPISODES, jobs,
                                        budget=sweep_of(memory, extra).frames):
        outcome = reported(f"{memory}: {' '.join(command[3:5])}", ended)
        if outcome is Outcome.interrupted:
            return outcome
        if outcome is Outcome.failed and memory not in failed:
            failed.append(memory)
    return Outcome.done


def seeds_left(memory: str, seeds: list[int], extra: list[str], root: Path) -> list[int]:
    """The seeds of the label ``memory`` whose runs in ``root`` the suite still starts (a
    finished run without its checkpoint is not: :func:`~experiments.common.suite_runs.startable`),
    saying which it does not start."""
    sweep = sweep_of(memory, extra)
    return seeds_to_start(runs_of(memory, seeds, extra, root), sweep.frames, sweep.stop_return)


def runs_of(memory: str, seeds: list[int], extra: list[str], root: Path) -> dict[int, Path]:
    """The run folder in ``root`` of each seed of the label ``memory``."""
    sweep = sweep_of(memory, extra)
    return runs_by_seed(root, ENV, sweep.label or memory, seeds)


def planned(root: Path, memory: str, seeds: list[int], extra: list[str]) -> list[PlannedRun]:
    """The runs of the label ``memory`` at ``seeds``, as the dry run shows them."""
    sweep = sweep_of(memory, extra)
    return [PlannedRun(f"{memory} seed {seed}", run_dir, sweep.frames, sweep.stop_return,
                       train_command(root, ENV, sweep.memory, seed, sweep.frames,
                                     sweep.overrides, sweep.label))
            for seed, run_dir in zip(seeds, run_dirs(root, ENV, [sweep.label or memory], seeds),
                                     strict=True)]


def train(memory: str, seeds: list[int], jobs: int, extra: list[str],
          runs: Path | None = None) -> None:
    """Train (or resume) the runs of one label: a cell, the reference or an ablation, in
    ``runs`` (default :data:`RUNS`); a finished run without its checkpoint is left as it is
    (:func:`~experiments.common.suite_runs.startable`), one trained part-way without it starts
    again from zero in a sweep of its own (:func:`~experiments.common.suite_runs.sweep_groups`)."""
    root = RUNS if runs is None else runs
    sweep = sweep_of(memory, extra)
    # asked again, not taken from main's list: a batch starts up to hours after that list was
    # made, and another sitting may have finished one of its seeds since
    if memory in ABLATIONS and ABLATIONS[memory].continues is not None:
        continue_from(str(ABLATIONS[memory].continues), memory,
                      seeds_left(memory, seeds, extra, root), root)
    label = {} if sweep.label is None else {"label": sweep.label}
    for chosen, again in sweep_groups(runs_of(memory, seeds, extra, root), sweep.frames,
                                      sweep.stop_return):
        train_sweep(root, ENV, [sweep.memory], chosen, sweep.frames, jobs,
                    [*sweep.overrides, *again], **label)


def continue_from(source: str, label: str, seeds: list[int], runs: Path | None = None) -> None:
    """Start each run of ``label`` that has no checkpoint yet as a copy of ``source``'s run of
    the same seed: its checkpoint, config and progress (not its evaluations or TensorBoard
    events), so training resumes where that run stopped. Seeds ``source`` does not train start
    afresh; a seed it trains but has not started is refused, before anything is copied. The
    runs are in ``runs`` (default :data:`RUNS`)."""
    root = RUNS if runs is None else runs
    pairs = [(root / ENV / source / f"seed{seed}", root / ENV / label / f"seed{seed}")
             for seed in seeds if seed < ABLATIONS[source].seeds]
    pairs = [(old, new) for old, new in pairs if not (new / CHECKPOINT_NAME).exists()]
    missing = [str(old) for old, _ in pairs if not (old / CHECKPOINT_NAME).exists()]
    if missing:
        sys.exit(f"memory suite: {label} continues {source}, but {', '.join(missing)} has no "
                 f"{CHECKPOINT_NAME}: run `python -m experiments.memory.suite --memories "
                 f"{source}` first")
    for old, new in pairs:
        shutil.copytree(old, new, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("eval", "tb", LOCK_NAME))
        print(f"[suite] {new} starts as a copy of {old}", flush=True)


if __name__ == "__main__":
    exit_passing_signals_on(main)

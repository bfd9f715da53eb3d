"""A suite's training runs when other processes may hold them: where each run stands (for a
``--dry-run``), and the steps of :mod:`experiments.common.sweep` run so that a run another process
holds is skipped, not counted as failed.

Two suites may run at once over the same runs (two terminals, two machines on one file
system). A run is held by whichever process has its lock; the other one's job fails at once
with ``RunLockedError`` and records it (:mod:`rlmem.runs.multirun`), and the suite reports that
run skipped (:mod:`experiments.common.outcome`). Runs held by another process when the
evaluations start are not evaluated (their checkpoint is about to change); an evaluation another
process is making of the same run and env is skipped likewise.

The rlmem processes of each step run in sessions of their own, and a suite passes on to them
the signals it receives (:mod:`experiments.common.signal_relay`): Ctrl-C, or SIGINT sent to
the suite's process alone, stops them at their next checkpoint, and no further step starts.

A run's standing is its frames trained (the last row of ``progress.csv``) against the suite's
budget, whether its checkpoint's last episodes met its ``stop_return`` (so that it trains no
further), and the PID of the live process that holds its lock, if any. The lock is probed with
a shared ``flock``, which a running run's exclusive lock refuses and which takes nothing from
it. A run without its checkpoint but evaluated at its final frames is finished too: the
repository keeps a finished run's results and not its checkpoint (``experiments/README.md``),
and the suites evaluate a run only once it has trained. The suites start no training for such
a run (:func:`startable`): ``rlmem.train`` would refuse its folder, and there is nothing left
to train.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from experiments.common.outcome import (
    Ending,
    Outcome,
    ending,
    failures_recorded_in,
    run_recorded,
)
from experiments.common.run_config import config_value, read_report
from experiments.common.sweep import (
    evaluation_command,
    final_frames,
    full_attention,
    run_dirs,
    run_memory,
)
from rlmem.runs.checkpoint import load_checkpoint
from rlmem.runs.episode_stats import STOP_EPISODES, EpisodeLog
from rlmem.runs.errors import RunError
from rlmem.runs.lock import lock_holder


@dataclass(frozen=True)
class Standing:
    """One run of a suite against its frame budget."""

    run_dir: Path
    frames: int | None
    """Frames trained (None before the first logged update)."""
    budget: int
    stopped: bool
    """Its checkpoint's last episodes met its ``stop_return``: it trains no further."""
    holder: str | None
    """PID of the live process running it now, if any."""
    kept: bool = False
    """No checkpoint, but an evaluation of its final frames: a finished run whose results the
    repository keeps without its checkpoint."""

    @property
    def finished(self) -> bool:
        return self.stopped or self.kept or (self.frames is not None
                                             and self.frames >= self.budget)

    def describe(self) -> str:
        """A few words for a dry run: ``trained 2048 of 4096 frames, running now (PID 7)``."""
        if self.frames is None:
            trained = "not started"
        elif self.stopped:
            trained = (f"finished: stopped at {self.frames} frames (its last {STOP_EPISODES} "
                       "episodes met stop_return)")
        elif self.kept and self.frames is not None and self.frames < self.budget:
            trained = (f"finished: {self.frames} frames (evaluated; its checkpoint is not "
                       "kept)")
        elif self.finished:
            trained = f"finished: {self.frames} frames"
        else:
            trained = f"trained {self.frames} of {self.budget} frames"
        return trained + (f", running now (PID {self.holder})" if self.holder else "")


def standing(run_dir: Path, budget: int, stop_return: float | None = None) -> Standing:
    """Where ``run_dir`` stands against ``budget`` frames and ``stop_return``."""
    frames = final_frames(run_dir)
    stopped = False
    checkpoint = run_dir / "checkpoint.pt"
    if stop_return is not None and frames is not None and frames < budget and \
            checkpoint.exists():
        try:
            recent = load_checkpoint(checkpoint).extras.get("recent_returns", [])
        except RunError:  # unreadable: the run itself will say so
            recent = []
        stopped = EpisodeLog(recent).reached(stop_return)
    kept = frames is not None and not checkpoint.exists() and evaluated_at(run_dir, frames)
    return Standing(run_dir, frames, budget, stopped, lock_holder(run_dir), kept)


def evaluated_at(run_dir: Path, frames: int) -> bool:
    """Whether ``run_dir`` holds an evaluation (``eval/<env>.json``) of its model at ``frames``."""
    return any(read_report(path, ("frames",))["frames"] == frames
               for path in sorted((run_dir / "eval").glob("*.json")))


def startable(run_dir: Path, budget: int, stop_return: float | None = None) -> bool:
    """Whether a suite starts ``python -m rlmem.train`` for ``run_dir``: for every run but a
    finished one without its checkpoint (a run with one returns at once when finished)."""
    return (run_dir / "checkpoint.pt").exists() or not standing(
        run_dir, budget, stop_return).finished


def left_to_start(runs: Sequence[Path], budget: int,
                  stop_return: float | None = None) -> list[Path]:
    """The runs of ``runs`` a suite starts (:func:`startable`), saying which it does not."""
    left = []
    for run_dir in runs:
        if startable(run_dir, budget, stop_return):
            left.append(run_dir)
        else:
            print(f"[suite] {run_dir}: {standing(run_dir, budget, stop_return).describe()}; "
                  "not started", flush=True)
    return left


def seeds_to_start(runs_of: Mapping[int, Path], budget: int,
                   stop_return: float | None = None) -> list[int]:
    """The seeds of ``runs_of`` (seed: its run's folder) whose runs a suite starts
    (:func:`left_to_start`, which says of the others why not)."""
    left = left_to_start(list(runs_of.values()), budget, stop_return)
    return [seed for seed, run_dir in runs_of.items() if run_dir in left]


AGAIN = ("resume=false", "force=true")
"""The overrides that start a run again from zero in its own folder: ``resume=false`` moves the
earlier run's files into its ``previous/`` (nothing is deleted). ``force=true`` because a run as
committed to this repository keeps only ``config.yaml``, ``progress.csv`` and ``eval/``, without
the marker that tells rlmem the folder is its own; the suite has read that ``config.yaml`` as
one of its own runs, at the path it gives that run."""


def cannot_resume(run_dir: Path, budget: int, stop_return: float | None = None) -> bool:
    """Whether ``run_dir`` holds a run trained part-way whose checkpoint is gone, and no live
    process runs it: a run committed to the repository before it finished keeps only its
    ``config.yaml`` and ``progress.csv``. It cannot resume, and ``rlmem.train`` refuses its
    folder as one it did not make, so a suite starts it again from zero (:data:`AGAIN`), its
    partial files kept in ``previous/``."""
    if (run_dir / "checkpoint.pt").exists() or not (run_dir / "config.yaml").is_file():
        return False
    where = standing(run_dir, budget, stop_return)
    return not where.finished and where.holder is None


def sweep_groups(runs_of: Mapping[int, Path], budget: int, stop_return: float | None = None
                 ) -> list[tuple[list[int], tuple[str, ...]]]:
    """The seeds of ``runs_of`` a suite starts (:func:`seeds_to_start`) as the sweeps that
    train them, each with the overrides it adds: the runs that start or resume, then those that
    :func:`cannot_resume`, with :data:`AGAIN` (a sweep's overrides reach all its runs, and
    ``resume=false`` would throw away a checkpoint). A group without seeds is left out."""
    seeds = seeds_to_start(runs_of, budget, stop_return)
    again = [seed for seed in seeds if cannot_resume(runs_of[seed], budget, stop_return)]
    groups = [([seed for seed in seeds if seed not in again], ()), (again, AGAIN)]
    return [(chosen, overrides) for chosen, overrides in groups if chosen]


def train_command(root: Path, env: str, memory: str, seed: int, frames: int,
                  overrides: Sequence[str] = (), label: str | None = None) -> list[str]:
    """The single ``python -m rlmem.train`` command that is one job of a suite's sweep (see
    :func:`~experiments.common.sweep.train_sweep`): the run of ``memory`` at ``seed`` on ``env`` in
    ``<root>/<env>/<label>/seed<k>``, the label being the memory's name unless given."""
    [run_dir] = run_dirs(root, env, [label or memory], [seed])
    return ["python", "-m", "rlmem.train", f"env={env}", f"memory={memory}", f"seed={seed}",
            f"frames={frames}", "progress_bar=false", f"run_dir={run_dir}", *overrides]


@dataclass(frozen=True)
class PlannedRun:
    """One run of a suite, as its dry run shows it."""

    name: str
    """``lstm seed 0``, as the suite names it."""
    run_dir: Path
    budget: int
    """Its frames."""
    stop_return: float | None
    command: list[str]
    """:func:`train_command`."""


def print_dry_run(planned: Sequence[PlannedRun], envs: Sequence[str], episodes: int,
                  train: bool = True) -> None:
    """Print where each run stands, the command that trains it (commented out when the suite
    would not run it: finished, held by another process, or ``train`` off), and the
    evaluations on ``envs`` due now (a run trained further is evaluated after its training)."""
    for run in planned:
        where = standing(run.run_dir, run.budget, run.stop_return)
        shown = run.command
        if cannot_resume(run.run_dir, run.budget, run.stop_return):
            print(f"# {run.name}: {where.describe()}, its checkpoint gone: starts again from "
                  "zero, the partial run moved into previous/")
            shown = [*shown, *AGAIN] if shown[-len(AGAIN):] != list(AGAIN) else shown
        else:
            print(f"# {run.name}: {where.describe()}")
        skip = not train or where.finished or where.holder is not None
        print(("# " if skip else "") + " ".join(shown))
        if not (run.run_dir / "checkpoint.pt").exists():
            continue
        for env in envs:
            command = evaluation_command(run.run_dir, env, episodes,
                                         full_attention(run_memory(run.run_dir), envs))
            if command is not None:
                print(("# " if where.holder else "") + " ".join(["python", *command[1:]]))
    print(flush=True)


def train_step(start: Callable[[], None]) -> Ending:
    """How ``start`` ended: a call of :func:`~experiments.common.sweep.train_sweep` (one sweep,
    which raises ``CalledProcessError`` when the sweep fails), its failures recorded in a
    directory of its own (:func:`~experiments.common.outcome.ending`)."""
    with tempfile.TemporaryDirectory(prefix="rlmem-records-") as records, \
            failures_recorded_in(Path(records)):
        def run() -> int:
            try:
                start()
            except subprocess.CalledProcessError as error:
                return error.returncode
            return 0

        return ending(run(), Path(records))


def batches(seeds: Sequence[int], jobs: int) -> list[list[int]]:
    """``seeds`` (a label's seeds left to train) ``jobs`` at a time: a suite evaluates each
    batch before the next trains, so a run that finished in a sitting is scored in it even when
    the label's later seeds are not (a 5M-frame run takes most of an hour of one core)."""
    return [list(seeds[start:start + jobs]) for start in range(0, len(seeds), jobs)]


def evaluate_step(runs: Sequence[Path], envs: Sequence[str], episodes: int,
                  jobs: int, first_to_end: bool = False, *,
                  budget: int) -> list[tuple[list[str], Ending]]:
    """Evaluate every run of ``runs`` finished against ``budget`` frames and the
    ``stop_return`` its ``config.yaml`` records (:class:`Standing`) on every env of ``envs``
    that lacks an up-to-date JSON
    (:func:`~experiments.common.sweep.evaluation_command`; MemLSTM with the capacity of
    :func:`~experiments.common.sweep.full_attention`; the episodes counted ``first_to_end``
    if so), ``jobs`` at a time, and how each evaluation ended. The runs another process holds
    now, and those not finished (a sitting that ended, a training that failed), are left out,
    saying so: an evaluation of a run part-way would be read as its result, and one at its last
    frames marks a run without its checkpoint finished (:func:`evaluated_at`)."""
    free = []
    for run in runs:
        if not (run / "checkpoint.pt").exists():
            continue
        stop_return = config_value(run, "stop_return")
        where = standing(run, budget,
                         float(stop_return) if isinstance(stop_return, (int, float)) else None)
        if where.holder is not None:
            print(f"[suite] {run}: running now (PID {where.holder}); not evaluated", flush=True)
        elif not where.finished:
            print(f"[suite] {run}: {where.describe()}; not evaluated", flush=True)
        else:
            free.append(run)
    commands = [command for run in free for env in envs
                if (command := evaluation_command(
                    run, env, episodes, full_attention(run_memory(run), envs),
                    first_to_end)) is not None]

    def execute(command: list[str]) -> tuple[list[str], Ending]:
        print("+", " ".join(command), flush=True)
        return command, run_recorded(command)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(execute, commands))


def reported(name: str, ended: Ending) -> Outcome:
    """Print what a suite says of the step ``name`` that ``ended`` so, and its outcome: each
    run another process held is skipped; a failure's own error is printed above."""
    if ended.outcome is Outcome.locked:
        for failure in ended.failures:
            print(f"[suite] {name}: {failure.describe()} Skipped.", flush=True)
    elif ended.outcome is Outcome.failed:
        print(f"[suite] {name}: FAILED (exit {ended.code}; its error is above)", flush=True)
    return ended.outcome


def add_run_arguments(parser: argparse.ArgumentParser, runs: Path, overrides_reach: str) -> None:
    """Add the arguments every suite shares, last (the overrides are positional): ``--runs``
    (where its run directories go; ``runs`` by default), ``--dry-run``, and the Hydra overrides
    after ``--``, which go to ``overrides_reach`` (e.g. "every training run")."""
    parser.add_argument("--runs", type=Path, default=runs, help="where the run directories go")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the commands and where each run stands; run nothing")
    parser.add_argument("overrides", nargs="*",
                        help=f"after --: Hydra overrides passed to {overrides_reach}")

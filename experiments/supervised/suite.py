"""The papers' supervised claims at the papers' settings: one run per preset and seed.

    python -m experiments.supervised.suite                    # every row, one run at a time
    python -m experiments.supervised.suite --dry-run          # the commands, and where each stands
    python -m experiments.supervised.suite --only headline    # relstm and lstm transfer-copy
    python -m experiments.supervised.suite --presets kag2020_adding_irnn_T750 --seeds 0
    python -m experiments.supervised.suite --jobs 2           # two runs at once
    python -m experiments.supervised.suite -- device=cuda     # Hydra overrides for every run

Every run is, from the repository root,

    python -m rlmem.supervised +preset=<preset> seed=<k> progress_bar=false \\
        run_dir=experiments/supervised/runs/<preset>/seed<k>

(and, for a preset of the suite's own, an ablation or a curriculum,
``hydra.searchpath=[file://experiments/supervised/conf]``: :data:`rows.CONF`), in the priority
order of :data:`rows.ROWS` (the headline relstm seeds, then lstm's, then the rest). A preset
trains until its target (99% recall at the training length, or a test MSE of 0.01 on adding) or
its iteration budget. The suite skips finished runs (a ``results.json`` whose target was met or
whose budget was spent), leaves alone a run another process is running (its lock is held), and
resumes every other run from its checkpoint, so a killed suite is simply started again. Ctrl-C
(or SIGINT to the suite's PID, :mod:`experiments.common.signal_relay`) stops the runs at their
next checkpoint and the suite with them.
``python -m experiments.supervised.aggregate`` writes ``RESULTS.md``.

Each run's output goes to ``<run_dir>/train.log``, one start after another, each under a line
naming the suite's PID, the time and the command. Two suites may run at once over the same
runs: the suite holds an exclusive lock on ``train.log`` (``flock``, inherited by the run's
process) while its run runs, and a suite that finds the log held skips the run without writing
a byte into it. A run held by a process that is no suite (a run started by hand) is skipped
too: seen before the start, or, when that process took the run in between, by the run's own
refusal (``RunLockedError``, :mod:`rlmem.runs.multirun`), which is then the last line of that
start in the log. Skipped runs make no failure: the suite exits with status 1 only when a run
failed.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hydra import compose, initialize_config_dir

from experiments.common.outcome import Outcome, run_recorded
from experiments.common.signal_relay import exit_passing_signals_on, stopping
from experiments.common.suite_runs import add_run_arguments
from experiments.supervised.rows import CONF, GROUPS, REPO, ROWS, RUNS, Row, by_preset, select
from experiments.supervised.status import RunStatus, State, run_status
from rlmem.runs import INTERRUPTED, RunDirectoryError
from rlmem.runs.directory import claim_run_dir
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.supervised import register_supervised_configs

LOG_NAME = "train.log"
"""Each run's stdout and stderr, appended to over every start."""


@contextmanager
def held_log(path: Path) -> Iterator[int | None]:
    """``path`` opened for appending (never through a link) and locked for this suite alone:
    its file descriptor, or None when another suite holds it (then nothing was written)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)  # the lock goes with the last descriptor (the run's copy may outlive it)


@dataclass(frozen=True)
class Job:
    """One run of the suite: a row's preset at one seed."""

    row: Row
    seed: int
    run_dir: Path
    command: tuple[str, ...]
    """As printed: ``python -m rlmem.supervised ...``, run from the repository root."""
    first: Job | None = None
    """The curriculum's first stage (:attr:`rows.Row.after`) at the same seed, whose run
    directory this run warm-starts from."""

    @property
    def label(self) -> str:
        return f"{self.row.preset} seed {self.seed}"


def shown(path: Path) -> str:
    """``path`` relative to the repository root when it is inside it (the commands run there)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def plan(rows: Sequence[Row], seeds: Sequence[int] | None, runs: Path,
         overrides: Sequence[str]) -> list[Job]:
    """Every (row, seed) to run, in priority order; ``seeds`` keeps only those seeds."""
    def job(row: Row, seed: int) -> Job:
        run_dir = row.run_dir(seed, runs)
        first = None if row.after is None else job(by_preset(row.after), seed)
        warm = () if first is None else (f"warm_start={shown(first.run_dir)}",)
        command = ("python", "-m", "rlmem.supervised", f"+preset={row.preset}", f"seed={seed}",
                   "progress_bar=false", f"run_dir={shown(run_dir)}", *warm,
                   *row.searchpath(shown(CONF)), *overrides)
        return Job(row, seed, run_dir, command, first)

    return [job(row, seed) for row in rows for seed in range(row.seeds)
            if seeds is None or seed in seeds]


class Budgets:
    """The ``iterations`` a run of each row gets with the suite's overrides (the preset's,
    unless overridden): composed once per row, one composition at a time (Hydra's
    initialisation is process-wide, and the runners are threads)."""

    def __init__(self, overrides: Sequence[str]) -> None:
        self.overrides = list(overrides)
        self.known: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, row: Row) -> int:
        with self.lock:
            if row.preset not in self.known:
                register_supervised_configs()
                with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                    cfg = compose(config_name="supervised",
                                  overrides=[*row.searchpath(), f"+preset={row.preset}",
                                             *self.overrides])
                self.known[row.preset] = int(cfg.iterations)
            return self.known[row.preset]

    def status(self, job: Job) -> RunStatus:
        """Where ``job`` stands; the budget is composed only when a ``results.json`` is
        there."""
        has_results = (job.run_dir / "results.json").exists()
        return run_status(job.run_dir, self(job.row) if has_results else None)


class Runner:
    """Runs a job in its own process, skipping finished and locked runs; the first
    interrupted run stops the jobs not yet started. A curriculum's second stage waits for its
    first stage's job (when the suite runs it), and is skipped unless that run finished."""

    def __init__(self, jobs: Sequence[Job], overrides: Sequence[str]) -> None:
        self.budgets = Budgets(overrides)
        self.stop = threading.Event()
        self.failed: list[str] = []
        self.lock = threading.Lock()
        self.done = {(job.row.preset, job.seed): threading.Event() for job in jobs}

    def __call__(self, job: Job) -> None:
        try:
            self.run(job)
        finally:
            self.done[job.row.preset, job.seed].set()

    def run(self, job: Job) -> None:
        if self.stop.is_set() or stopping():
            return
        if job.first is not None:
            started = self.done.get((job.first.row.preset, job.seed))
            if started is not None:  # the suite runs the first stage too: wait for it
                started.wait()
            if self.budgets.status(job.first).state is not State.finished:
                print(f"[suite] {job.label}: its first stage, {job.first.label}, has not "
                      "finished; skipped", flush=True)
                return
        status = self.budgets.status(job)
        if status.state is State.finished:
            print(f"[suite] {job.label}: {status.describe()}; skipped", flush=True)
            return
        if status.holder is not None:
            print(f"[suite] {job.label}: run by PID {status.holder} now; skipped", flush=True)
            return
        log = job.run_dir / LOG_NAME
        try:
            claim_run_dir(job.run_dir)  # the log goes into it: it must be an rlmem run first
        except RunDirectoryError as error:
            with self.lock:
                self.failed.append(job.label)
            print(f"[suite] {job.label}: FAILED: {error}", flush=True)
            return
        with held_log(log) as output:
            if output is None:
                print(f"[suite] {job.label}: another suite is running it (its {shown(log)} is "
                      "held); skipped", flush=True)
                return
            print(f"[suite] {job.label}: {status.describe()}; starting, log {shown(log)}\n"
                  f"+ {' '.join(job.command)}", flush=True)
            now = time.strftime("%Y-%m-%d %H:%M:%S %Z")
            os.write(output, f"\n[suite PID {os.getpid()}, {now}] + "
                             f"{' '.join(job.command)}\n".encode())
            env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
            ended = run_recorded([sys.executable, *job.command[1:]], cwd=REPO, env=env,
                                 stdout=output, stderr=subprocess.STDOUT)
        after = self.budgets.status(job)
        if ended.outcome is Outcome.interrupted:
            self.stop.set()
            print(f"[suite] {job.label}: interrupted at its checkpoint", flush=True)
        elif ended.outcome is Outcome.locked:
            print(f"[suite] {job.label}: {ended.failures[0].reason} Skipped.", flush=True)
        elif ended.outcome is Outcome.failed and after.state is State.finished:
            # A diverged run exits with an error, having recorded its divergence as its result.
            print(f"[suite] {job.label}: {after.describe()}", flush=True)
        elif ended.outcome is Outcome.failed:
            with self.lock:
                self.failed.append(job.label)
            print(f"[suite] {job.label}: FAILED (exit {ended.code}); see {shown(log)}",
                  flush=True)
        else:
            print(f"[suite] {job.label}: {after.describe()}", flush=True)


def dry_run(jobs: Sequence[Job], overrides: Sequence[str]) -> None:
    """Print each job's command, commented out when the suite would skip it."""
    budgets = Budgets(overrides)
    for job in jobs:
        status = budgets.status(job)
        skip = status.state is State.finished or status.holder is not None
        print(f"# {job.label}: {status.describe()}")
        print(("# " if skip else "") + " ".join(job.command))


def seeds_help() -> str:
    """What seeds the rows declare, counted from :data:`rows.ROWS`: each row runs seeds 0 to
    n - 1."""
    counts = Counter(row.seeds for row in ROWS)
    return "each row runs seeds 0 to n - 1: " + ", ".join(
        f"n = {seeds} for {rows} rows" for seeds, rows in sorted(counts.items(), reverse=True)
    ) + "; --dry-run lists them"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=GROUPS,
                        help="rows of these groups (headline: relstm and lstm transfer-copy)")
    parser.add_argument("--presets", nargs="+", choices=[row.preset for row in ROWS],
                        metavar="PRESET", help="rows of these presets")
    parser.add_argument("--seeds", nargs="+", type=int,
                        help=f"only these seeds ({seeds_help()})")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (each on one thread)")
    add_run_arguments(parser, RUNS, "every run")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    jobs = plan(select(args.only, args.presets), args.seeds, args.runs.resolve(),
                args.overrides)
    if not jobs:
        parser.error("the filters leave no run")
    if args.dry_run:
        dry_run(jobs, args.overrides)
        return 0
    runner = Runner(jobs, args.overrides)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(runner, job) for job in jobs]
        for job, future in zip(jobs, futures, strict=True):
            if (error := future.exception()) is not None:  # e.g. a preset that fails
                with runner.lock:
                    runner.failed.append(f"{job.label} ({type(error).__name__}: {error})")
    if runner.stop.is_set() or stopping():
        return INTERRUPTED
    if runner.failed:
        print(f"[suite] failed: {', '.join(runner.failed)}", flush=True)
        return 1
    print("[suite] done; tabulate with: python -m experiments.supervised.aggregate", flush=True)
    return 0


if __name__ == "__main__":
    exit_passing_signals_on(main)

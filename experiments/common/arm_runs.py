"""One recipe of our PPO against another ("arms") at the same env, cell, seeds and frames:
each arm's runs trained (or resumed), evaluated, and their final returns compared.

The comparisons that ask "does this change of the trainer learn as before?" share it:
:mod:`experiments.tensor_backend.compare` (the tensor envs against the gymnasium ones) and
:mod:`experiments.fast_trainer.learning` (the fast preset against the defaults issue 59
started from). An arm's runs are ``<root>/<env>/<directory>/seed<k>/``; a run whose
``progress.csv`` has its frames is not trained again, and an interrupted one resumes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.common.report import improvement, iqm_ci, seeds, three
from experiments.common.signal_relay import run_child
from rlmem.evaluate import report_path
from rlmem.runs import INTERRUPTED
from rlmem.runs.progress import read_progress


@dataclass(frozen=True)
class Case:
    """One env of a comparison."""

    env: str
    frames: int
    """Frames per run (each suite's budget: transfer 500k, memory 1M, POPGym 163,840)."""


@dataclass(frozen=True)
class Arm:
    """One recipe: what it adds to ``python -m rlmem.train``'s command line, and where its
    runs are."""

    name: str
    """How the comparison's lines name it."""
    overrides: tuple[str, ...]
    """Hydra overrides after the env, cell, seed and frames."""
    root: Path | None = None
    """Where its runs are when not in the comparison's own runs (an earlier experiment's runs
    of the same recipe, read and evaluated there, trained there only where missing)."""
    directory: str | None = None
    """The runs' folder under ``<root>/<env>/``; default: :attr:`name`."""

    def run_dir(self, runs: Path, env: str, seed: int) -> Path:
        """The run of ``seed`` on ``env``; ``runs`` is the comparison's own runs."""
        return (self.root or runs) / env / (self.directory or self.name) / f"seed{seed}"


def trained_frames(run: Path) -> int:
    """The frames a run's ``progress.csv`` reached (0 without one)."""
    progress = run / "progress.csv"
    rows = read_progress(progress) if progress.exists() else []
    return int(rows[-1].number("frames")) if rows else 0


def final_return(run: Path, frames: int) -> float | None:
    """A run's last ``return_recent`` (its last 100 training episodes) once it has trained
    ``frames``; None before (a run still training), or when it ended no episode (a smoke
    test's few frames)."""
    progress = run / "progress.csv"
    rows = read_progress(progress) if progress.exists() else []
    if not rows or rows[-1].number("frames") < frames:
        return None
    value = rows[-1].number("return_recent")
    return None if math.isnan(value) else value


def train(run: Path, env: str, memory: str, seed: int, frames: int, arm: Arm,
          extra: Sequence[str]) -> int:
    """Train (or resume) one run of ``arm`` up to ``frames``; its exit status (0 when it was
    already done)."""
    if trained_frames(run) >= frames:
        return 0
    print(f"{env} {arm.name} seed {seed}: training to {frames:,} frames", flush=True)
    return run_child([sys.executable, "-m", "rlmem.train", f"env={env}", f"memory={memory}",
                      *arm.overrides, f"seed={seed}", f"frames={frames}", "progress_bar=false",
                      f"run_dir={run}", *extra])


def trained_and_evaluated(run: Path, env: str, memory: str, seed: int, frames: int, arm: Arm,
                          extra: Sequence[str], evaluations: Sequence[tuple[str, int]]) -> int:
    """Train (or resume) one run of ``arm``, then evaluate it on each ``(env, episodes)`` of
    ``evaluations`` that is not done; the first non-zero exit status, else 0. A run that
    ended no episode in its frames (a smoke test's) is not evaluated."""
    code = train(run, env, memory, seed, frames, arm, extra)
    for target, episodes in evaluations:
        if code != 0 or final_return(run, frames) is None:
            break
        code = evaluate(run, target, episodes)
    return code


def seed_runs(runs: Path, arms: Sequence[Arm], case: Case, memory: str, seed: int, frames: int,
              extra: Sequence[str], evaluations: Sequence[tuple[str, int]]) -> int:
    """:func:`trained_and_evaluated` for every arm's run of one env and seed; the number that
    failed, or :data:`~rlmem.runs.INTERRUPTED` as soon as one is interrupted."""
    failed = 0
    for arm in arms:
        code = trained_and_evaluated(arm.run_dir(runs, case.env, seed), case.env, memory, seed,
                                     frames, arm, extra, evaluations)
        if code == INTERRUPTED:
            return code
        failed += code != 0
    return failed


def evaluation(run: Path, env: str, episodes: int) -> Path:
    """Where :func:`evaluate` writes a run's evaluation on ``env``."""
    return report_path(run, env, episodes=episodes)


def evaluated_return(run: Path, env: str, episodes: int) -> float | None:
    """A run's mean evaluated return on ``env``; None before its evaluation."""
    path = evaluation(run, env, episodes)
    return float(json.loads(path.read_text())["return_mean"]) if path.exists() else None


def evaluate(run: Path, env: str, episodes: int) -> int:
    """Evaluate a trained run on ``env`` (the original envs, sampled actions, seed 0) unless
    done; the exit status."""
    if evaluation(run, env, episodes).exists():
        return 0
    print(f"{run}: evaluating on {env}, {episodes} episodes", flush=True)
    return run_child([sys.executable, "-m", "rlmem.evaluate", f"run={run}", f"env={env}",
                      f"episodes={episodes}", "progress_bar=false"])


def comparison_lines(title: str, values: Mapping[str, Sequence[float | None]], new: str,
                     old: str) -> list[str]:
    """``title``, then each arm's value per seed (a dash where a run is missing) with the IQM
    and its 95% bootstrap interval, then P(new ≥ old) with its interval (ties counting one
    half)."""
    done = {name: [value for value in arm_values if value is not None]
            for name, arm_values in values.items()}
    width = max(map(len, values))
    return [f"{title}:",
            *(f"  {name:{width}}  {seeds(arm_values, three)}; IQM {iqm_ci(done[name], three)}"
              for name, arm_values in values.items()),
            f"  P({new} ≥ {old}) {improvement(done[new], done[old])}"]


def comparison_parser(description: str, runs: Path, cases: Sequence[Case], seeds: Sequence[int],
                      results: Path) -> argparse.ArgumentParser:
    """The command line every comparison takes: ``--no-train``, ``--runs``, ``--frames`` (smoke
    tests), ``--envs`` and ``--seeds`` (a part of it), ``--write`` (into ``results``) and Hydra
    overrides for every run after ``--``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--no-train", action="store_true", help="compare the runs there are")
    parser.add_argument("--runs", type=Path, default=runs, help="where the runs are")
    parser.add_argument("--frames", type=int, default=None,
                        help="frames per run instead of each env's budget (smoke tests)")
    parser.add_argument("--envs", nargs="+", default=[case.env for case in cases],
                        choices=[case.env for case in cases], help="a part of the comparison")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(seeds),
                        help="a part of the test seeds (smoke tests)")
    parser.add_argument("--write", action="store_true",
                        help=f"write the comparison into {results.name} as well")
    parser.add_argument("extra", nargs="*", help="Hydra overrides given to every run")
    return parser


def run_all(cases: Sequence[Case], seeds: Sequence[int], frames: int | None,
            one: Callable[[Case, int, int], int]) -> int:
    """``one(case, seed, frames)`` (the runs of every arm of one env and seed; its failures)
    for every case and seed, ``frames`` or each case's own; the failures, or
    :data:`~rlmem.runs.INTERRUPTED` as soon as one is interrupted."""
    failed = 0
    for case in cases:
        for seed in seeds:
            code = one(case, seed, frames or case.frames)
            if code == INTERRUPTED:
                return code
            failed += code
    return failed


def reported(lines: Sequence[str], failed: int, results: Path | None, page: str) -> int:
    """Print a comparison's ``lines``, write ``page`` into ``results`` (unless None), say how
    many runs failed; the exit status."""
    print("\n".join(lines), flush=True)
    if results is not None:
        results.write_text(page)
    if failed:
        print(f"{failed} runs failed; running this again resumes them.", flush=True)
    return 1 if failed else 0

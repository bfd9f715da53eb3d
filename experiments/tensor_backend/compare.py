"""Does our PPO learn on the tensor envs as on the gymnasium ones? (issue 54's condition for
making ``env_backend=tensor`` the default.)

    python -m experiments.tensor_backend.compare   # train and evaluate what is left, then compare
    python -m experiments.tensor_backend.compare --no-train   # compare the runs there are
    python -m experiments.tensor_backend.compare --no-train --write   # ... into RESULTS.md

lstm on DoorKey-5x5, MemoryS7 and RepeatFirstEasy, test seeds 3-7 (fixed before any run, none
of them a seed a suite tuned on), each on both backends at the same frames and every other
setting the defaults: 30 runs in ``runs/<env>/<backend>/seed<k>/``. A run whose
``progress.csv`` has its frames is not trained again, and an interrupted one resumes. The
measure is each run's last ``return_recent`` (the last 100 training episodes); per env the
script prints each seed's final on both backends, their IQM with its 95% bootstrap interval
and P(tensor ≥ gymnasium) with its interval (:mod:`rlmem.stats`, ties counting one half).
Learning is unchanged within noise where that interval contains ½ or lies above it. A second
measure, apart from each backend's own bookkeeping of its training episodes: every trained run
evaluated on its training env (``python -m rlmem.evaluate run=<run> env=<env>``: the original
envs, :data:`EPISODES` episodes with sampled actions, seed 0), the same lines of its mean
returns.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.common.report import improvement, iqm_ci, seeds, three
from experiments.common.signal_relay import exit_passing_signals_on, run_child
from rlmem.evaluate import report_path
from rlmem.runs import INTERRUPTED
from rlmem.runs.progress import read_progress

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
RESULTS = HERE / "RESULTS.md"
SEEDS = (3, 4, 5, 6, 7)
"""The test seeds, fixed in advance."""
BACKENDS = ("gymnasium", "tensor")
EPISODES = 200
"""Episodes of each run's evaluation."""


@dataclass(frozen=True)
class Case:
    """One env of the comparison."""

    env: str
    frames: int
    """Frames per run: the env's suite's budget (transfer: 500k; memory: 1M; POPGym: 163,840)."""


CASES = (Case("DoorKey-5x5", 499_712), Case("MemoryS7", 999_424),
         Case("RepeatFirstEasy", 163_840))


def run_dir(root: Path, env: str, backend: str, seed: int) -> Path:
    return root / env / backend / f"seed{seed}"


def trained_frames(run: Path) -> int:
    """The frames a run's ``progress.csv`` reached (0 without one)."""
    progress = run / "progress.csv"
    rows = read_progress(progress) if progress.exists() else []
    return int(rows[-1].number("frames")) if rows else 0


def final_return(run: Path, frames: int) -> float | None:
    """A run's last ``return_recent`` once it has trained ``frames``; None before (a run still
    training), or when it ended no episode (a smoke test's few frames)."""
    progress = run / "progress.csv"
    rows = read_progress(progress) if progress.exists() else []
    if not rows or rows[-1].number("frames") < frames:
        return None
    value = rows[-1].number("return_recent")
    return None if math.isnan(value) else value


def train(root: Path, case: Case, backend: str, seed: int, frames: int,
          extra: Sequence[str]) -> int:
    """Train (or resume) one run up to ``frames``; its exit status (0 when already done)."""
    where = run_dir(root, case.env, backend, seed)
    if trained_frames(where) >= frames:
        return 0
    print(f"{case.env} {backend} seed {seed}: training to {frames:,} frames", flush=True)
    return run_child([sys.executable, "-m", "rlmem.train", f"env={case.env}", "memory=lstm",
                      f"env_backend={backend}", f"seed={seed}", f"frames={frames}",
                      "progress_bar=false", f"run_dir={where}", *extra])


def evaluation(run: Path, env: str) -> Path:
    """Where :func:`evaluate` writes a run's evaluation."""
    return report_path(run, env, episodes=EPISODES)


def evaluated_return(run: Path, env: str) -> float | None:
    """A run's mean evaluated return; None before its evaluation."""
    path = evaluation(run, env)
    return float(json.loads(path.read_text())["return_mean"]) if path.exists() else None


def evaluate(run: Path, env: str) -> int:
    """Evaluate a trained run on its training env (not the transfer env, ``rlmem.evaluate``'s
    default), unless done; the exit status."""
    if evaluation(run, env).exists():
        return 0
    print(f"{run}: evaluating, {EPISODES} episodes", flush=True)
    return run_child([sys.executable, "-m", "rlmem.evaluate", f"run={run}", f"env={env}",
                      f"episodes={EPISODES}", "progress_bar=false"])


def compare_lines(env: str, finals: dict[str, list[float | None]], measure: str) -> list[str]:
    """Each backend's seeds, IQM and P(tensor ≥ gymnasium) of one measure."""
    done = {backend: [value for value in values if value is not None]
            for backend, values in finals.items()}
    lines = [f"{env} (lstm, seeds {SEEDS[0]}-{SEEDS[-1]}), {measure}:"]
    for backend in BACKENDS:
        lines.append(f"  {backend:9}  {seeds(finals[backend], three)}; "
                     f"IQM {iqm_ci(done[backend], three)}")
    lines.append("  P(tensor ≥ gymnasium) "
                 f"{improvement(done['tensor'], done['gymnasium'])}")
    return lines


def compare(root: Path, case: Case, frames: int) -> list[str]:
    """The lines of one env's comparison, of the runs that trained ``frames``: the last
    ``return_recent``, then the evaluated return."""
    runs = {backend: [run_dir(root, case.env, backend, seed) for seed in SEEDS]
            for backend in BACKENDS}
    finals = {backend: [final_return(run, frames) for run in backend_runs]
              for backend, backend_runs in runs.items()}
    evaluated = {backend: [evaluated_return(run, case.env) for run in backend_runs]
                 for backend, backend_runs in runs.items()}
    return [*compare_lines(case.env, finals, "last return_recent"),
            *compare_lines(case.env, evaluated, f"evaluated ({EPISODES} episodes)")]


def results_page(lines: Sequence[str]) -> str:
    """``RESULTS.md``: what was compared, how, and :func:`compare`'s lines."""
    return "\n".join([
        "# Our PPO on the tensor envs and on the gymnasium envs (issue 54)", "",
        "Written by `python -m experiments.tensor_backend.compare --no-train --write`; the "
        "runs are in `runs/<env>/<backend>/seed<k>/` (`config.yaml`, `progress.csv`).", "",
        f"lstm, the test seeds {', '.join(map(str, SEEDS))} (fixed before any run), every "
        "setting the default but `env_backend`; frames per run: "
        + ", ".join(f"{case.env} {case.frames:,}" for case in CASES) + ". The measure is "
        "each run's last `return_recent` (the mean return of its last 100 training episodes); "
        "IQM with its 95% stratified bootstrap interval; P(tensor ≥ gymnasium) with its 95% "
        "bootstrap interval, ties counting one half (`rlmem.stats`). Learning is unchanged "
        "within noise where that interval contains ½ or lies above it. The second measure of "
        f"each env: every run evaluated on the original envs, {EPISODES} episodes with sampled "
        "actions (`python -m rlmem.evaluate run=<run> env=<env> episodes=200`).", "",
        "```", *lines, "```", ""])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-train", action="store_true", help="compare the runs there are")
    parser.add_argument("--runs", type=Path, default=RUNS, help="where the runs are")
    parser.add_argument("--frames", type=int, default=None,
                        help="frames per run instead of each env's budget (smoke tests)")
    parser.add_argument("--envs", nargs="+", default=[case.env for case in CASES],
                        choices=[case.env for case in CASES], help="a part of the comparison")
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS),
                        help="a part of the test seeds (smoke tests)")
    parser.add_argument("--write", action="store_true",
                        help=f"write the comparison into {RESULTS.name} as well")
    parser.add_argument("extra", nargs="*", help="Hydra overrides given to every run")
    args = parser.parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]
    failed = 0
    for case in cases if not args.no_train else ():
        for seed in args.seeds:
            for backend in BACKENDS:
                frames = args.frames or case.frames
                where = run_dir(args.runs, case.env, backend, seed)
                code = train(args.runs, case, backend, seed, frames, args.extra)
                if code == 0 and final_return(where, frames) is not None:
                    code = evaluate(where, case.env)
                if code == INTERRUPTED:
                    return code
                failed += code != 0
    lines = [line for case in cases
             for line in compare(args.runs, case, args.frames or case.frames)]
    print("\n".join(lines), flush=True)
    if args.write:
        RESULTS.write_text(results_page(lines))
    if failed:
        print(f"{failed} runs failed; running this again resumes them.", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    exit_passing_signals_on(main)

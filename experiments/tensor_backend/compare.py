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

from collections.abc import Sequence
from pathlib import Path

from experiments.common.arm_runs import (
    Arm,
    Case,
    comparison_lines,
    comparison_parser,
    evaluated_return,
    final_return,
    reported,
    run_all,
    seed_runs,
)
from experiments.common.signal_relay import exit_passing_signals_on
from rlmem.runs import INTERRUPTED

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
RESULTS = HERE / "RESULTS.md"
SEEDS = (3, 4, 5, 6, 7)
"""The test seeds, fixed in advance."""
ARMS = (Arm("gymnasium", ("env_backend=gymnasium",)), Arm("tensor", ("env_backend=tensor",)))
"""The backends compared, every other setting the default; the second is the new one."""
EPISODES = 200
"""Episodes of each run's evaluation."""
CASES = (Case("DoorKey-5x5", 499_712), Case("MemoryS7", 999_424),
         Case("RepeatFirstEasy", 163_840))


def compare(root: Path, case: Case, frames: int) -> list[str]:
    """The lines of one env's comparison, of the runs that trained ``frames``: the last
    ``return_recent``, then the evaluated return."""
    runs = {arm.name: [arm.run_dir(root, case.env, seed) for seed in SEEDS] for arm in ARMS}
    title = f"{case.env} (lstm, seeds {SEEDS[0]}-{SEEDS[-1]}), "
    gymnasium, tensor = (arm.name for arm in ARMS)
    return [
        *comparison_lines(title + "last return_recent",
                          {name: [final_return(run, frames) for run in arm_runs]
                           for name, arm_runs in runs.items()}, tensor, gymnasium),
        *comparison_lines(title + f"evaluated ({EPISODES} episodes)",
                          {name: [evaluated_return(run, case.env, EPISODES) for run in arm_runs]
                           for name, arm_runs in runs.items()}, tensor, gymnasium)]


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
    args = comparison_parser(__doc__.split("\n\n")[0], RUNS, CASES, SEEDS,
                             RESULTS).parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]

    failed = 0 if args.no_train else run_all(
        cases, args.seeds, args.frames,
        lambda case, seed, frames: seed_runs(args.runs, ARMS, case, "lstm", seed, frames,
                                             args.extra, [(case.env, EPISODES)]))
    if failed == INTERRUPTED:
        return failed
    lines = [line for case in cases
             for line in compare(args.runs, case, args.frames or case.frames)]
    return reported(lines, failed, RESULTS if args.write else None, results_page(lines))


if __name__ == "__main__":
    exit_passing_signals_on(main)

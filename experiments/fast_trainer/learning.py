"""Does the fast preset learn as the defaults issue 59 started from did? (issue 59's "learning
unchanged or better", measured on the test seeds.)

    python -m experiments.fast_trainer.learning                 # train and evaluate what is left
    python -m experiments.fast_trainer.learning --no-train --write   # compare into RESULTS.md

lstm on DoorKey-5x5 and MemoryS7 at their suites' budgets, test seeds 3-7 (the fast preset's
shape was chosen on seeds 0-2, ``TUNING.md``), two arms:

- ``reference``: the defaults of f7a96db, where issue 59 started: the minigrid preset on the
  gymnasium envs stepped in the trainer's process, Adam's ``foreach`` loop, one update thread.
  Its runs are :mod:`experiments.tensor_backend.compare`'s gymnasium runs, made with exactly
  that arithmetic before ``agent.fused_adam`` existed (``tests/agents/test_ppo_sync_fixture.py``
  holds this path bit-exact since issue 32); one missing there is trained there with
  :data:`REFERENCE_OVERRIDES`, which keep it so.
- ``fast``: ``agent.preset=fast`` and every other setting the default (the tensor envs, and
  Adam's fused kernel as the run decides), in ``learning_runs/<env>/fast/seed<k>/``.

Three measures per env, each with every seed, its IQM with a 95% bootstrap interval and
P(fast ≥ reference) with its interval (:mod:`rlmem.stats`, ties counting one half): the last
``return_recent`` at the same frames (the last 100 training episodes), the return evaluated on
the training env (:data:`EPISODES` episodes), and zero-shot on its transfer env, DoorKey-16x16
or MemoryS13 (:data:`TRANSFER_EPISODES` episodes): every evaluation ``python -m rlmem.evaluate
run=<run> env=<env> episodes=<n>``, on the original envs with sampled actions, seed 0. Learning
is unchanged within noise where P's interval contains ½, better where it lies above.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
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
from experiments.tensor_backend import compare as tensor_backend
from rlmem.envs import transfer_target
from rlmem.runs import INTERRUPTED

HERE = Path(__file__).resolve().parent
RUNS = HERE / "learning_runs"
RESULTS = HERE / "RESULTS.md"
SEEDS = (3, 4, 5, 6, 7)
"""The test seeds, fixed before any tuning."""
MEMORY = "lstm"
REFERENCE_OVERRIDES = ("env_backend=gymnasium", "vectorization=sync", "agent.fused_adam=false",
                       "agent.update_threads=1")
"""f7a96db's defaults on a machine of at most 3 cores (where its ``vectorization=auto`` steps
the envs in the process), written out so that today's code runs them with its arithmetic."""
FAST = Arm("fast", ("agent.preset=fast",))
CASES = tuple(case for case in tensor_backend.CASES if case.env in ("DoorKey-5x5", "MemoryS7"))
"""The MiniGrid envs of the tensor-backend comparison, at its frames (the transfer suite's
500k, the memory suite's 1M): the reference runs are there."""
EPISODES = tensor_backend.EPISODES
"""Episodes of the evaluation on the training env (the reference runs' own)."""
TRANSFER_EPISODES = 100
"""Episodes of the zero-shot evaluation (the transfer suite's)."""


def arms(reference_runs: Path) -> tuple[Arm, Arm]:
    """The reference, whose runs are in ``reference_runs`` (``<env>/gymnasium/seed<k>/``), and
    the fast preset."""
    return Arm("reference", REFERENCE_OVERRIDES, root=reference_runs, directory="gymnasium"), FAST


def measures(runs: Path, reference: Arm, new: Arm, case: Case, frames: int,
             seeds: Sequence[int] = SEEDS) -> dict[str, dict[str, list[float | None]]]:
    """The three measures of one env (the module docstring), each arm's value per seed of
    ``seeds`` (None: not there yet), ``new``'s runs against ``reference``'s that trained
    ``frames`` (``runs``: the comparison's own)."""
    arm_runs = {arm.name: [arm.run_dir(runs, case.env, seed) for seed in seeds]
                for arm in (reference, new)}
    target = transfer_target(case.env)
    of_run: dict[str, Callable[[Path], float | None]] = {
        "last return_recent": lambda run: final_return(run, frames),
        f"evaluated ({EPISODES} episodes)": lambda run: evaluated_return(
            run, case.env, EPISODES),
        f"zero-shot on {target} ({TRANSFER_EPISODES} episodes)": lambda run: evaluated_return(
            run, target, TRANSFER_EPISODES)}
    return {measure: {name: [value(run) for run in each] for name, each in arm_runs.items()}
            for measure, value in of_run.items()}


def compare(runs: Path, reference: Arm, new: Arm, case: Case, frames: int,
            memory: str = MEMORY, seeds: Sequence[int] = SEEDS) -> list[str]:
    """The lines of one env's three :func:`measures` over ``seeds``, ``new``'s runs against
    ``reference``'s, of the runs of ``memory`` that trained ``frames``."""
    title = f"{case.env} ({memory}, seeds {seeds[0]}-{seeds[-1]}), "
    return [line for measure, values
            in measures(runs, reference, new, case, frames, seeds).items()
            for line in comparison_lines(title + measure, values, new.name, reference.name)]


def results_page(lines: Sequence[str]) -> str:
    """``RESULTS.md``: what was compared, how, and :func:`compare`'s lines."""
    return comparison_page(
        "The fast preset against issue 59's starting defaults", "learning",
        "the fast preset's runs are in `learning_runs/<env>/fast/seed<k>/`, the reference's in "
        "`../tensor_backend/runs/<env>/gymnasium/seed<k>/`", lines)


def comparison_page(title: str, module: str, where: str, lines: Sequence[str],
                    memory: str = MEMORY, seeds: Sequence[int] = SEEDS) -> str:
    """A results page of one of this folder's comparisons on :data:`CASES` and ``seeds``:
    ``title``, the command of ``module`` that writes it, ``where`` its runs are, ``lines``,
    the runs' cell ``memory``."""
    return "\n".join([
        f"# {title}: learning (issue 59)", "",
        f"Written by `python -m experiments.fast_trainer.{module} --no-train --write`; {where} "
        "(each with `config.yaml`, `progress.csv` and `eval/`). How each arm was run and what "
        f"each measure is: the docstring of `experiments/fast_trainer/{module}.py`.", "",
        f"{memory}, the test seeds {', '.join(map(str, seeds))}; frames per run: "
        + ", ".join(f"{case.env} {case.frames:,}" for case in CASES) + ".", "",
        "```", *lines, "```", ""])


def train_arms(args: argparse.Namespace, arms_run: Sequence[Arm], cases: Sequence[Case],
               memory: str = MEMORY) -> int:
    """Train and evaluate what is left of ``arms_run``'s runs of ``memory`` on ``cases`` at
    the seeds and frames of ``args`` (:func:`~experiments.common.arm_runs.comparison_parser`'s);
    the failures, or :data:`~rlmem.runs.INTERRUPTED`."""
    return run_all(
        cases, args.seeds, args.frames,
        lambda case, seed, frames: seed_runs(
            args.runs, arms_run, case, memory, seed, frames, args.extra,
            [(case.env, EPISODES), (transfer_target(case.env), TRANSFER_EPISODES)]))


def main_against_fast(argv: Sequence[str] | None, description: str, new: Arm, results: Path,
                      page: Callable[[Sequence[str]], str], old: Arm = FAST,
                      memory: str = MEMORY) -> int:
    """The command of a comparison of ``new`` against ``old`` (default :data:`FAST`, the fast
    preset's lstm runs kept in :data:`RUNS`), both with ``memory``: train and evaluate what is
    left, print the comparison's lines and, with ``--write``, write ``page(lines)`` into
    ``results``."""
    parser = comparison_parser(description, RUNS, CASES, SEEDS, results)
    args = parser.parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]
    failed = 0 if args.no_train else train_arms(args, (old, new), cases, memory)
    if failed == INTERRUPTED:
        return failed
    lines = [line for case in cases
             for line in compare(args.runs, old, new, case, args.frames or case.frames,
                                 memory)]
    return reported(lines, failed, results if args.write else None, page(lines))


def main(argv: Sequence[str] | None = None) -> int:
    parser = comparison_parser(__doc__.split("\n\n")[0], RUNS, CASES, SEEDS, RESULTS)
    parser.add_argument("--reference-runs", type=Path, default=tensor_backend.RUNS,
                        help="where the reference's runs are (--runs: the fast preset's)")
    args = parser.parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]
    failed = 0 if args.no_train else train_arms(args, arms(args.reference_runs), cases)
    if failed == INTERRUPTED:
        return failed
    lines = [line for case in cases
             for line in compare(args.runs, *arms(args.reference_runs), case,
                                 args.frames or case.frames)]
    return reported(lines, failed, RESULTS if args.write else None, results_page(lines))


if __name__ == "__main__":
    exit_passing_signals_on(main)

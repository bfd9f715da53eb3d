"""Do two processes learn as one? ``agent.processes=2`` against one, at the fast preset (issue
59's "learning unchanged", for the data-parallel trainer).

    python -m experiments.fast_trainer.processes                 # train and evaluate what is left
    python -m experiments.fast_trainer.processes --no-train --write   # compare into PROCESSES.md

lstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms:

- ``fast``: ``agent.preset=fast``, one process: :mod:`~experiments.fast_trainer.learning`'s
  runs, read (and evaluated) where they are, ``learning_runs/<env>/fast/seed<k>/``;
- ``fast, 2 processes``: the same and ``agent.processes=2``
  (:mod:`rlmem.agents.ppo.replicas`), in ``learning_runs/<env>/fast_processes2/seed<k>/``.

The two compute the same minibatches' gradient, rounded otherwise (equal in float64:
``tests/agents/test_replicas.py``), but draw otherwise: the second process's envs, actions and
minibatches come from a generator seeded apart. So a seed's two runs differ as two seeds do,
and only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning` (the last ``return_recent``, the evaluated return and
the zero-shot return), each with every seed, its IQM with a 95% bootstrap interval and
P(2 processes ≥ 1) with its interval.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import (
    Arm,
    comparison_parser,
    reported,
    run_all,
    seed_runs,
)
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.learning import (
    CASES,
    EPISODES,
    FAST,
    HERE,
    MEMORY,
    RUNS,
    SEEDS,
    TRANSFER_EPISODES,
    compare,
    comparison_page,
)
from rlmem.envs import transfer_target
from rlmem.runs import INTERRUPTED

RESULTS = HERE / "PROCESSES.md"
TWO = Arm("fast, 2 processes", (*FAST.overrides, "agent.processes=2"),
          directory="fast_processes2")


def results_page(lines: Sequence[str]) -> str:
    """``PROCESSES.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "Two processes against one, at the fast preset", "processes",
        "the runs are in `learning_runs/<env>/fast/seed<k>/` (one process) and "
        "`learning_runs/<env>/fast_processes2/seed<k>/`", lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = comparison_parser(__doc__.split("\n\n")[0], RUNS, CASES, SEEDS, RESULTS)
    args = parser.parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]
    failed = 0 if args.no_train else run_all(
        cases, args.seeds, args.frames,
        lambda case, seed, frames: seed_runs(
            args.runs, (FAST, TWO), case, MEMORY, seed, frames, args.extra,
            [(case.env, EPISODES), (transfer_target(case.env), TRANSFER_EPISODES)]))
    if failed == INTERRUPTED:
        return failed
    lines = [line for case in cases
             for line in compare(args.runs, FAST, TWO, case, args.frames or case.frames)]
    return reported(lines, failed, RESULTS if args.write else None, results_page(lines))


if __name__ == "__main__":
    exit_passing_signals_on(main)

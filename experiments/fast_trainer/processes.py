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

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.learning import FAST, HERE, comparison_page, main_against_fast

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
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], TWO, RESULTS, results_page)


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""Does the folded grid encoder learn as its modules do? ``agent.folded_grid=true`` against
the fast preset's runs without it (issue 59's "learning unchanged", for the encoder's fold).

    python -m experiments.fast_trainer.folded_grid            # train and evaluate what is left
    python -m experiments.fast_trainer.folded_grid --no-train --write   # into FOLDED_GRID.md

lstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms:

- ``fast``: ``agent.preset=fast``, the modules: :mod:`~experiments.fast_trainer.learning`'s
  runs, read (and evaluated) where they are, ``learning_runs/<env>/fast/seed<k>/`` (they
  recorded ``agent.fused_adam: true``, the decision of their day, and one update thread);
- ``fast, folded grid``: the same with ``agent.folded_grid=true``
  (:mod:`rlmem.agents.grid_fold`), and Adam's fused kernel asked for as those runs had it, so
  that the fold is the one difference, in ``learning_runs/<env>/fast_folded/seed<k>/``
  (torch's LSTM kernel, as every run then had it: ``agent.compiled_lstm=false`` is written out
  since runs decide it on).

The fold computes the encoder's function rounded otherwise (equal in float64:
``tests/agents/test_grid_fold.py``), so a seed's two runs start alike and drift apart as
rounding compounds: only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning` (the last ``return_recent``, the evaluated return and
the zero-shot return), each with every seed, its IQM with a 95% bootstrap interval and
P(folded ≥ modules) with its interval.

The rule, written before any of these runs: ``agent.folded_grid`` left null is decided on
(outside the exact reference, a CUDA device and the other grid encodings) if every one of the
six P intervals contains ½ or lies above it; otherwise it stays off, selectable.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.learning import FAST, HERE, comparison_page, main_against_fast

RESULTS = HERE / "FOLDED_GRID.md"
WITH_FOLD = (*FAST.overrides, "agent.folded_grid=true", "agent.fused_adam=true")
"""What the folded arm runs with besides the LSTM's engine (which the compiled LSTM's check
changes)."""
FOLDED = Arm("fast, folded grid", (*WITH_FOLD, "agent.compiled_lstm=false"),
             directory="fast_folded")


def results_page(lines: Sequence[str]) -> str:
    """``FOLDED_GRID.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "The folded grid encoder against its modules, at the fast preset", "folded_grid",
        "the runs are in `learning_runs/<env>/fast/seed<k>/` (the modules) and "
        "`learning_runs/<env>/fast_folded/seed<k>/`", lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], FOLDED, RESULTS, results_page)


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""Does lstm learn with its chunks in the compiled loop as with torch's kernel per reset-free
segment? ``agent.compiled_lstm=true`` against the folded grid's runs (issue 59's "learning
unchanged", for the LSTM's engine).

    python -m experiments.fast_trainer.compiled_lstm            # train and evaluate what is left
    python -m experiments.fast_trainer.compiled_lstm --no-train --write   # into COMPILED_LSTM.md

lstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms:

- ``fast, folded grid``: :mod:`~experiments.fast_trainer.folded_grid`'s runs, read (and
  evaluated) where they are, ``learning_runs/<env>/fast_folded/seed<k>/`` (the fast preset,
  the folded grid encoder, Adam's fused kernel, one update thread, torch's LSTM kernel once
  per reset-free segment);
- ``fast, folded grid, compiled LSTM``: the same with ``agent.compiled_lstm=true``
  (:mod:`rlmem.cells._engines.lstm_chunk`: every chunk that a reset cuts in one call of the
  compiled loops), in ``learning_runs/<env>/fast_compiled_lstm/seed<k>/``.

The two compute the same function rounded otherwise (equal in float64:
``tests/cells/test_lstm_chunk.py``), so a seed's two runs start alike and drift apart as
rounding compounds: only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning` (the last ``return_recent``, the evaluated return and
the zero-shot return), each with every seed, its IQM with a 95% bootstrap interval and
P(compiled ≥ kernel) with its interval.

The rule, written before any of these runs: ``agent.compiled_lstm`` left null is decided on
(outside the exact reference and a CUDA device) if every one of the six P intervals contains
½ or lies above it; otherwise it stays off, selectable.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.folded_grid import FOLDED, WITH_FOLD
from experiments.fast_trainer.learning import HERE, comparison_page, main_against_fast

RESULTS = HERE / "COMPILED_LSTM.md"
COMPILED = Arm("fast, folded grid, compiled LSTM",
               (*WITH_FOLD, "agent.compiled_lstm=true"),
               directory="fast_compiled_lstm")
""":data:`~experiments.fast_trainer.folded_grid.FOLDED` with the compiled loop asked for in
place of torch's kernel."""


def results_page(lines: Sequence[str]) -> str:
    """``COMPILED_LSTM.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "The LSTM's chunks in the compiled loop against torch's kernel per segment, at the "
        "fast preset", "compiled_lstm",
        "the runs are in `learning_runs/<env>/fast_folded/seed<k>/` (torch's kernel) and "
        "`learning_runs/<env>/fast_compiled_lstm/seed<k>/`", lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], COMPILED, RESULTS, results_page,
                             old=FOLDED)


if __name__ == "__main__":
    exit_passing_signals_on(main)

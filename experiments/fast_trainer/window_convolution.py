"""Does lstm learn with the grid encoder's second convolution as one product over its windows
as with oneDNN's convolution? The fast preset's defaults at this commit against the compiled
LSTM's runs (issue 59's "learning unchanged", for the folded encoder's second convolution).

    python -m experiments.fast_trainer.window_convolution        # train and evaluate what is left
    python -m experiments.fast_trainer.window_convolution --no-train --write
                                                                 # into WINDOW_CONVOLUTION.md

lstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms with the same overrides
(:data:`~experiments.fast_trainer.compiled_lstm.COMPILED`'s: the fast preset, the folded grid
encoder, Adam's fused kernel, one update thread, lstm's chunks in the compiled loop):

- ``fast, folded grid, compiled LSTM``: :mod:`~experiments.fast_trainer.compiled_lstm`'s runs,
  read (and evaluated) where they are, ``learning_runs/<env>/fast_compiled_lstm/seed<k>/``,
  the encoder's second convolution and its ReLU in oneDNN's convolution;
- ``fast, window convolution``: the same overrides at this commit, where the folded encoder
  computes that convolution as one product over its input's windows, compiled
  (:func:`rlmem.agents.grid_fold.window_convolution`), in
  ``learning_runs/<env>/fast_window_convolution/seed<k>/``. Nothing else differs: every change
  to the trainer between the two arms' commits keeps a run's numbers bit for bit (the first
  updates of a seed's run at the commit before this one reproduce the stored run's
  ``progress.csv`` in every column but ``fps``: ``benchmarks/results/fast_trainer.md``, session
  78).

The two compute the same function rounded otherwise (equal in float64:
``tests/agents/test_grid_fold.py``), so a seed's two runs start alike and drift apart as
rounding compounds: only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning`, each with every seed, its IQM with a 95% bootstrap
interval and P(window ≥ oneDNN) with its interval.

The rule, written before any of these runs: the window convolution stays the folded
encoder's if every one of the six P intervals contains ½ or lies above it; otherwise it goes
behind a setting of its own, off by default, until more seeds decide (with five seeds the rule
fails about one time in four where nothing differs: ``RULE_CALIBRATION.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.compiled_lstm import COMPILED
from experiments.fast_trainer.learning import HERE, comparison_page, main_against_fast

RESULTS = HERE / "WINDOW_CONVOLUTION.md"
WINDOWS = Arm("fast, window convolution", COMPILED.overrides,
              directory="fast_window_convolution")
""":data:`~experiments.fast_trainer.compiled_lstm.COMPILED`'s overrides at this commit."""


def results_page(lines: Sequence[str]) -> str:
    """``WINDOW_CONVOLUTION.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "The folded encoder's second convolution as one product over its windows against "
        "oneDNN's convolution, at the fast preset", "window_convolution",
        "the runs are in `learning_runs/<env>/fast_compiled_lstm/seed<k>/` (oneDNN's "
        "convolution) and `learning_runs/<env>/fast_window_convolution/seed<k>/`", lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], WINDOWS, RESULTS, results_page,
                             old=COMPILED)


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""Does lstm learn with its chunks in the compiled loop with the blocked AVX-512 products as with
the chunks of the window convolution's runs? The fast preset's defaults at this commit against
those runs (issue 59's "learning unchanged", for the blocked products of the LSTM chunk).

    python -m experiments.fast_trainer.blocked_lstm        # train and evaluate what is left
    python -m experiments.fast_trainer.blocked_lstm --no-train --write
                                                           # into BLOCKED_LSTM.md

lstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms with the same overrides
(:data:`~experiments.fast_trainer.compiled_lstm.COMPILED`'s: the fast preset, the folded grid
encoder, Adam's fused kernel, one update thread, lstm's chunks in the compiled loop):

- ``fast, window convolution``: :mod:`~experiments.fast_trainer.window_convolution`'s runs,
  read (and evaluated) where they are, ``learning_runs/<env>/fast_window_convolution/seed<k>/``:
  a chunk that a reset cuts in the compiled loop, its products ATen's (MKL's), every other
  chunk in torch's kernel (oneDNN);
- ``fast, blocked LSTM chunk``: the same overrides at this commit, where on a CPU with AVX-512
  the compiled chunk's products are its own blocked loop (``csrc/blocked_product.h``) and a
  minibatch's chunk that no reset cuts (16 steps of 16 items, hidden 64, under autograd) runs
  in the compiled loop too (:func:`rlmem.cells._engines.lstm_chunk.takes_whole_chunk`), in
  ``learning_runs/<env>/fast_blocked_lstm/seed<k>/``. Nothing else differs: the trainer's
  other changes between the two arms' commits (the allocator's thresholds, the research cells'
  oneDNN products inside ``onednn_products()``, DeltaNet's loop) leave lstm's PPO arithmetic
  as it was.

The two compute the same function rounded otherwise (equal in float64:
``tests/cells/test_lstm_chunk.py``), so a seed's two runs start alike and drift apart as
rounding compounds: only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning`, each with every seed, its IQM with a 95% bootstrap
interval and P(blocked ≥ window convolution) with its interval.

The rule, written before any of these runs: the blocked chunk stays lstm's path where the CPU
has AVX-512 if every one of the six P intervals contains ½ or lies above it; otherwise a chunk
that no reset cuts goes back to torch's kernel and the blocked products behind a setting of
their own, off by default, until more seeds decide (with five seeds the rule fails about one
time in four where nothing differs: ``RULE_CALIBRATION.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.compiled_lstm import COMPILED
from experiments.fast_trainer.learning import HERE, comparison_page, main_against_fast
from experiments.fast_trainer.window_convolution import WINDOWS

RESULTS = HERE / "BLOCKED_LSTM.md"
BLOCKED = Arm("fast, blocked LSTM chunk", COMPILED.overrides, directory="fast_blocked_lstm")
""":data:`~experiments.fast_trainer.compiled_lstm.COMPILED`'s overrides at this commit."""


def results_page(lines: Sequence[str]) -> str:
    """``BLOCKED_LSTM.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "lstm's chunks in the compiled loop with the blocked AVX-512 products against the "
        "window convolution's runs, at the fast preset", "blocked_lstm",
        "the runs are in `learning_runs/<env>/fast_window_convolution/seed<k>/` (a cut chunk's "
        "products in MKL, the others in torch's kernel) and "
        "`learning_runs/<env>/fast_blocked_lstm/seed<k>/`", lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], BLOCKED, RESULTS, results_page,
                             old=WINDOWS)


if __name__ == "__main__":
    exit_passing_signals_on(main)

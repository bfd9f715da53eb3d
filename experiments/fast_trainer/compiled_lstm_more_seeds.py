"""Does lstm learn with its chunks in the compiled loop as with torch's kernel? The check on more
seeds that :mod:`~experiments.fast_trainer.compiled_lstm` left ``agent.compiled_lstm`` waiting
for (issue 59's "learning unchanged", for the LSTM's engine).

    python -m experiments.fast_trainer.compiled_lstm_more_seeds          # train what is left
    python -m experiments.fast_trainer.compiled_lstm_more_seeds --no-train --write
                                                        # decide, into COMPILED_LSTM_MORE_SEEDS.md

The first check, on the test seeds 3-7 (``COMPILED_LSTM.md``), failed its rule on one of its
six intervals (DoorKey-5x5's last training return, P = 0.12 [0.00, 0.40]); its rule was measured
afterwards (``RULE_CALIBRATION.md``) to call a harmless change harmful about one time in four,
and that interval's paired permutation p-value was 0.031. This check trains the same two arms,
:data:`~experiments.fast_trainer.folded_grid.FOLDED` (torch's kernel once per reset-free
segment) and :data:`~experiments.fast_trainer.compiled_lstm.COMPILED`, with the same budgets
and evaluations (:mod:`~experiments.fast_trainer.learning`), on ten more seeds, 8-17, which no
tuning and no check has used, into ``learning_runs/<env>/fast_folded/seed<k>/`` and
``learning_runs/<env>/fast_compiled_lstm/seed<k>/``, and decides on all fifteen.

The rule, written and committed before any run of seeds 8-17: the statistic is the lowest upper
bound of the six P(compiled ≥ kernel) 95% intervals (the three measures of each env) over the
seeds 3-17; its p-value is the share of the paired relabelings whose statistic is at or below
the observed one (every swap of the arms within any set of seeds, 2¹⁵ an env, the two envs
relabeled independently: :mod:`~experiments.fast_trainer.rule_calibration`'s measurement 2,
exact). ``agent.compiled_lstm`` left null is decided on (outside the exact reference and CUDA)
if p ≥ 0.05 (:data:`~experiments.fast_trainer.more_seeds.LEVEL`), so that a change that learns
alike is called harmful in 5% of the checks, not one in four; otherwise it stays off,
selectable. With a run missing or failed, nothing is decided. Seeds 3-7's runs are the first
check's, as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.compiled_lstm import COMPILED
from experiments.fast_trainer.folded_grid import FOLDED
from experiments.fast_trainer.learning import HERE, MEMORY, comparison_page
from experiments.fast_trainer.more_seeds import ALL_SEEDS, main_more_seeds
from experiments.fast_trainer.rule_calibration import Comparison

RESULTS = HERE / "COMPILED_LSTM_MORE_SEEDS.md"
CHECK = Comparison(RESULTS.name, FOLDED, COMPILED)


def results_page(lines: Sequence[str]) -> str:
    """``COMPILED_LSTM_MORE_SEEDS.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "The LSTM's chunks in the compiled loop against torch's kernel per segment, at the "
        "fast preset, on fifteen seeds", "compiled_lstm_more_seeds",
        "the runs are in `learning_runs/<env>/fast_folded/seed<k>/` (torch's kernel) and "
        "`learning_runs/<env>/fast_compiled_lstm/seed<k>/`", lines, seeds=ALL_SEEDS)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring; ``--seeds`` picks among the added seeds)."""
    return main_more_seeds(argv, __doc__.split("\n\n")[0], CHECK, "compiled_lstm", RESULTS,
                           results_page, MEMORY)


if __name__ == "__main__":
    exit_passing_signals_on(main)

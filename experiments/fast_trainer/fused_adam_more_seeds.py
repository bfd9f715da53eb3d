"""Does relstm learn with Adam's fused kernel as with its ``foreach`` steps? The check on more
seeds for :mod:`~experiments.fast_trainer.fused_adam_learning`, whose rule failed on one of six
intervals (issue 59's "learning unchanged", for the optimizer's kernel).

    python -m experiments.fast_trainer.fused_adam_more_seeds             # train what is left
    python -m experiments.fast_trainer.fused_adam_more_seeds --no-train --write
                                                        # decide, into FUSED_ADAM_MORE_SEEDS.md

The first check, relstm on the test seeds 3-7 (``FUSED_ADAM_LEARNING.md``), failed its rule on
MemoryS7's evaluated return (P = 0.16 [0.00, 0.48]); the paired permutation p-value of its
lowest upper bound was 0.121 (``RULE_CALIBRATION.md``). This check trains the same two arms,
:data:`~experiments.fast_trainer.fused_adam_learning.FOREACH` and
:data:`~experiments.fast_trainer.fused_adam_learning.FUSED` (relstm, the fast preset, the grid
folded, one update thread; the kernel the one difference), with the same budgets and
evaluations, on the seeds 8-17, into ``learning_runs/<env>/relstm_fast_foreach/seed<k>/`` and
``learning_runs/<env>/relstm_fast_fused/seed<k>/``, and decides on all fifteen.

The rule, written and committed before any run of seeds 8-17, is
:mod:`~experiments.fast_trainer.more_seeds`'s: the statistic is the lowest upper bound of the
six P(fused ≥ foreach) 95% intervals over the seeds 3-17; its p-value is the share of the
paired relabelings (2¹⁵ an env, the envs relabeled independently, exact) whose statistic is at
or below the observed one. ``agent.fused_adam`` left null is decided on (outside the exact
reference and CUDA, for every cell) if p ≥ 0.05; otherwise it stays off, selectable. With a
run missing or failed, nothing is decided. Seeds 3-7's runs are the first check's, as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.fused_adam_learning import FOREACH, FUSED, MEMORY
from experiments.fast_trainer.learning import HERE, comparison_page
from experiments.fast_trainer.more_seeds import ALL_SEEDS, main_more_seeds
from experiments.fast_trainer.rule_calibration import Comparison

RESULTS = HERE / "FUSED_ADAM_MORE_SEEDS.md"
CHECK = Comparison(RESULTS.name, FOREACH, FUSED)


def results_page(lines: Sequence[str]) -> str:
    """``FUSED_ADAM_MORE_SEEDS.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "Adam's fused kernel against its foreach steps, relstm at the fast preset, on fifteen "
        "seeds", "fused_adam_more_seeds",
        "the runs are in `learning_runs/<env>/relstm_fast_foreach/seed<k>/` and "
        "`learning_runs/<env>/relstm_fast_fused/seed<k>/`", lines, memory=MEMORY,
        seeds=ALL_SEEDS)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring; ``--seeds`` picks among the added seeds)."""
    return main_more_seeds(argv, __doc__.split("\n\n")[0], CHECK, "fused_adam", RESULTS,
                           results_page, MEMORY)


if __name__ == "__main__":
    exit_passing_signals_on(main)

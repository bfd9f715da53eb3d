"""Does relstm learn with Adam's fused kernel as with its ``foreach`` steps, now that the
weights it derives for acting follow every optimizer step? ``agent.fused_adam=true`` against
``false`` at the fast preset (issue 59's "learning unchanged", for the optimizer's kernel).

    python -m experiments.fast_trainer.fused_adam_learning           # train and evaluate
    python -m experiments.fast_trainer.fused_adam_learning --no-train --write   # the page

relstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms, both ``agent.preset=fast`` with the grid encoder folded
(``agent.folded_grid=true``, the default when these runs were made) and one update thread (what
the preset's minibatches of 256 decide), written out so that the kernel is the one difference:

- ``fast, foreach``: ``agent.fused_adam=false``, the default when these runs were made, in
  ``learning_runs/<env>/relstm_fast_foreach/seed<k>/``;
- ``fast, fused``: ``agent.fused_adam=true``, in ``learning_runs/<env>/relstm_fast_fused/seed<k>/``.

(Made in session 73 from a worktree at 9406a59, whose trainer modules came from the main
checkout: the MemoryS7 runs of seeds 4-7 of both arms started after ``agent.compiled_lstm``
was added there and recorded it, off; it changes nothing for relstm, whose engine is not the
LSTM's.)

Why relstm: the fused kernel once lost relstm every run (0 of 9,
``experiments/fast_trainer/FUSED_ADAM.md``) because it writes the weights without counting the
write, and relstm, relrnn, memlstm and irnn keep derived weights for acting until a weight
changes; the kept weights now follow every optimizer step (``rlmem/cells/_engines/
weight_cache.py``, ``tests/cells/test_weight_cache.py``). lstm derives nothing, and its
fast-preset checks already ran with the fused kernel (``RESULTS.md``'s and ``FOLDED_GRID.md``'s
fast arms recorded ``agent.fused_adam: true``).

The two kernels compute the same update rounded otherwise (equal in float64:
``tests/agents/test_fused_adam.py``), so a seed's two runs start alike and drift apart as
rounding compounds: only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning` (the last ``return_recent``, the evaluated return and
the zero-shot return), each with every seed, its IQM with a 95% bootstrap interval and
P(fused ≥ foreach) with its interval.

The rule, written before any of these runs: ``agent.fused_adam`` left null is decided on
(outside the exact reference and a CUDA device, as ``agent.folded_grid`` is) if every one of the
six P intervals contains ½ or lies above it; otherwise it stays off, selectable.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.learning import FAST, HERE, comparison_page, main_against_fast

RESULTS = HERE / "FUSED_ADAM_LEARNING.md"
MEMORY = "relstm"
PINNED = (*FAST.overrides, "agent.folded_grid=true", "agent.update_threads=1")
"""What both arms run with besides the kernel: the fast preset, folded, one update thread."""
FOREACH = Arm("fast, foreach", (*PINNED, "agent.fused_adam=false"),
              directory="relstm_fast_foreach")
FUSED = Arm("fast, fused", (*PINNED, "agent.fused_adam=true"), directory="relstm_fast_fused")


def results_page(lines: Sequence[str]) -> str:
    """``FUSED_ADAM_LEARNING.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "Adam's fused kernel against its foreach steps, relstm at the fast preset",
        "fused_adam_learning",
        "the runs are in `learning_runs/<env>/relstm_fast_foreach/seed<k>/` and "
        "`learning_runs/<env>/relstm_fast_fused/seed<k>/`", lines, memory=MEMORY)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], FUSED, RESULTS, results_page,
                             old=FOREACH, memory=MEMORY)


if __name__ == "__main__":
    exit_passing_signals_on(main)

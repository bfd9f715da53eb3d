"""Does relstm learn with its own products as inside ``onednn_products()`` as with torch's?
``agent.memory_products=true`` against ``false`` at the fast preset (issue 59's "learning
unchanged", for ``agent.memory_products``).

    python -m experiments.fast_trainer.memory_products        # train and evaluate what is left
    python -m experiments.fast_trainer.memory_products --no-train --write
                                                              # into MEMORY_PRODUCTS.md

relstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms, both ``agent.preset=fast`` with every other key a run decides
written out as this commit decides them (the folded grid encoder, Adam's fused kernel, the
model's blocked products, one update thread), so that the cell's products are the one
difference:

- ``fast, torch's products``: ``agent.memory_products=false`` (the default until this check
  decides), in ``learning_runs/<env>/relstm_fast_torch_products/seed<k>/``;
- ``fast, memory products``: ``agent.memory_products=true``, in
  ``learning_runs/<env>/relstm_fast_memory_products/seed<k>/``: relstm's compiled loops'
  products (each step's, forward and backward, and the weight gradients after the loop) in
  oneDNN and the blocked AVX-512 loop (``rlmem/cells/_engines/csrc/products.h``), as the
  supervised trainer runs them.

Why relstm: it is the cell this library exists for, its update at the fast preset spent about a
fifth of its time in MKL's small products, and lstm (the other checks' cell) takes none of them
(its chunks are the compiled LSTM chunk's already).

The two compute the same function rounded otherwise (within float32 rounding:
``tests/cells/test_onednn_linear.py``), so a seed's two runs start alike and drift apart as
rounding compounds: only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning`, each with every seed, its IQM with a 95% bootstrap
interval and P(memory products ≥ torch's) with its interval.

The rule, written before any of these runs: ``agent.memory_products`` left null is decided on
(outside the exact reference and CUDA, as ``agent.blocked_products`` is) if every one of the six
P intervals contains ½ or lies above it; otherwise it stays off until more seeds decide (with
five seeds the rule fails about one time in four where nothing differs:
``RULE_CALIBRATION.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.learning import FAST, HERE, comparison_page, main_against_fast

RESULTS = HERE / "MEMORY_PRODUCTS.md"
MEMORY = "relstm"
PINNED = (*FAST.overrides, "agent.folded_grid=true", "agent.fused_adam=true",
          "agent.blocked_products=true", "agent.update_threads=1")
"""What both arms run with besides the cell's products: the fast preset and the kernels this
commit decides for such a run."""
TORCH = Arm("fast, torch's products", (*PINNED, "agent.memory_products=false"),
            directory="relstm_fast_torch_products")
MEMORY_PRODUCTS = Arm("fast, memory products", (*PINNED, "agent.memory_products=true"),
                      directory="relstm_fast_memory_products")


def results_page(lines: Sequence[str]) -> str:
    """``MEMORY_PRODUCTS.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "relstm's own products as inside onednn_products() (agent.memory_products) against "
        "torch's, at the fast preset", "memory_products",
        "the runs are in `learning_runs/<env>/relstm_fast_torch_products/seed<k>/` and "
        "`learning_runs/<env>/relstm_fast_memory_products/seed<k>/`", lines, memory=MEMORY)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], MEMORY_PRODUCTS, RESULTS,
                             results_page, old=TORCH, memory=MEMORY)


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""Does lstm learn with the model's own products (its heads', its folded grid encoder's last two
convolutions) in the blocked AVX-512 loop as without? ``agent.blocked_products=true`` against
the blocked LSTM chunk's runs (issue 59's "learning unchanged", for ``agent.blocked_products``).

    python -m experiments.fast_trainer.blocked_products        # train and evaluate what is left
    python -m experiments.fast_trainer.blocked_products --no-train --write
                                                               # into BLOCKED_PRODUCTS.md

lstm on DoorKey-5x5 and MemoryS7 at the budgets of :mod:`experiments.fast_trainer.learning`,
its test seeds 3-7, two arms:

- ``fast, blocked LSTM chunk``: :mod:`~experiments.fast_trainer.blocked_lstm`'s runs, read (and
  evaluated) where they are, ``learning_runs/<env>/fast_blocked_lstm/seed<k>/``, with
  :data:`~experiments.fast_trainer.compiled_lstm.COMPILED`'s overrides (the fast preset, the
  folded grid encoder, Adam's fused kernel, one update thread, lstm's chunks in the compiled
  loop), the model's products torch's (MKL's);
- ``fast, blocked products``: the same overrides and ``agent.blocked_products=true`` at this
  commit, in ``learning_runs/<env>/fast_blocked_products/seed<k>/``: the actor's and critic's
  hidden layers and the folded encoder's window and last convolutions in the blocked loop
  (:mod:`rlmem.agents.blocked_linear`; the heads' outputs, 7 and 1 wide, stay torch's:
  :data:`~rlmem.agents.blocked_linear.MIN_OUTPUTS`). Nothing else differs: without the key
  this commit computes a run's numbers as the first arm's commit did (its other changes: the
  research cells' and the supervised trainer's products inside ``onednn_products()``, LRU's
  GLU, the grid fold's check of its indices).

The check ran first at 05528e5, where the heads' outputs took the blocked loop too; every P
interval contained ½ (0.36, 0.44, 0.68; 0.72, 0.68, 0.48; those runs are in the history at
ad00d5b). Their outputs then went back to torch's products, the faster there, and the check was
run again, by the same rule, into fresh runs at this commit.

The two compute the same function rounded otherwise (within float32 rounding:
``tests/agents/test_blocked_linear.py``), so a seed's two runs start alike and drift apart as
rounding compounds: only the distributions can agree. The three measures of
:mod:`~experiments.fast_trainer.learning`, each with every seed, its IQM with a 95% bootstrap
interval and P(blocked products ≥ torch's) with its interval.

The rule, written before any of these runs: ``agent.blocked_products`` left null is decided on
(outside the exact reference and CUDA, as ``agent.fused_adam`` is) if every one of the six P
intervals contains ½ or lies above it; otherwise it stays off until more seeds decide (with
five seeds the rule fails about one time in four where nothing differs:
``RULE_CALIBRATION.md``).
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import Arm
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.blocked_lstm import BLOCKED
from experiments.fast_trainer.learning import HERE, comparison_page, main_against_fast

RESULTS = HERE / "BLOCKED_PRODUCTS.md"
PRODUCTS = Arm("fast, blocked products", (*BLOCKED.overrides, "agent.blocked_products=true"),
               directory="fast_blocked_products")
""":data:`~experiments.fast_trainer.blocked_lstm.BLOCKED`'s overrides with the model's products
in the blocked loop."""


def results_page(lines: Sequence[str]) -> str:
    """``BLOCKED_PRODUCTS.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "The model's own products in the blocked AVX-512 loop (agent.blocked_products) against "
        "torch's, at the fast preset", "blocked_products",
        "the runs are in `learning_runs/<env>/fast_blocked_lstm/seed<k>/` (torch's products) "
        "and `learning_runs/<env>/fast_blocked_products/seed<k>/`", lines)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring)."""
    return main_against_fast(argv, __doc__.split("\n\n")[0], PRODUCTS, RESULTS, results_page,
                             old=BLOCKED)


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""Should ``fast`` be MiniGrid's default preset? The fast preset against the minigrid preset that
MiniGrid and BabyAI runs take today, both with today's kernels, lstm and relstm, on fifteen
seeds (issue 59: "``agent.preset=fast`` (and the default where it wins)").

    python -m experiments.fast_trainer.fast_default                  # train what is left
    python -m experiments.fast_trainer.fast_default --no-train --write   # into FAST_DEFAULT.md

Until now the fast preset was checked against issue 59's starting defaults only (lstm, seeds
3-7, ``RESULTS.md``: every P interval contained ½, every estimate below it) and timed against
that start (``benchmarks/results/time_to_solve.md``); since then the minigrid preset itself got
faster (the tensor envs, the folded grid, the compiled LSTM, Adam's fused kernel). This check
compares the two presets as a run takes them today, every other setting equal, with the
budgets and evaluations of :mod:`~experiments.fast_trainer.learning` (the last training
return, evaluated on the training env, zero-shot on DoorKey-16x16 or MemoryS13):

- ``fast``: the arms whose runs on seeds 3-17 are kept already, each the fast preset with what
  a run decides today pinned: lstm's :data:`~experiments.fast_trainer.compiled_lstm.COMPILED`
  (the folded grid, fused Adam, the compiled LSTM; ``learning_runs/<env>/fast_compiled_lstm/``)
  and relstm's :data:`~experiments.fast_trainer.fused_adam_learning.FUSED` (the folded grid,
  fused Adam, one update thread; ``learning_runs/<env>/relstm_fast_fused/``).
- ``minigrid``: the same overrides with ``agent.preset=minigrid`` in place of
  ``agent.preset=fast`` (16 envs × 128 frames, 4 epochs of minibatches of 256), trained by this
  module into ``learning_runs/<env>/minigrid/`` and ``learning_runs/<env>/relstm_minigrid/``.

The rule, written and committed before any run of the minigrid arms: for each cell, the
statistic and p-value of :mod:`~experiments.fast_trainer.more_seeds` (the lowest upper bound of
the six P(fast ≥ minigrid) 95% intervals over seeds 3-17, against its exact distribution over
the 2¹⁵ within-seed swaps per env). Learning counts as unchanged for a cell if its p ≥ 0.05
(:data:`~experiments.fast_trainer.more_seeds.LEVEL`). ``fast`` becomes the preset of the
minigrid family (MiniGrid and BabyAI envs, :func:`rlmem.envs.family.env_family`) if learning is
unchanged for both cells **and** the fast preset solves faster than the minigrid preset in all
four rows (lstm and relstm on DoorKey-5x5 and MemoryS7: a lower IQM of wall seconds to
``stop_return=0.9``, seeds 3-7) of ``python benchmarks/time_to_solve.py --reference <C> --new
<C> --runs benchmarks/time_to_solve_runs_fast_default``, ``<C>`` the commit that added this
module, 49caca8 (its defaults are the minigrid arm's: the time benchmark's new side adds
``agent.preset=fast`` alone). Otherwise ``minigrid`` stays the family's preset and ``fast``
is asked for. With a run missing or failed, nothing is decided.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import partial

from experiments.common.arm_runs import Arm, comparison_parser, reported
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer import more_seeds
from experiments.fast_trainer.compiled_lstm import COMPILED
from experiments.fast_trainer.fused_adam_learning import FUSED
from experiments.fast_trainer.learning import CASES, HERE, RUNS, comparison_page, train_arms
from experiments.fast_trainer.more_seeds import ALL_SEEDS, check_lines
from experiments.fast_trainer.rule_calibration import Comparison, env_values
from rlmem.runs import INTERRUPTED

RESULTS = HERE / "FAST_DEFAULT.md"
FAST_PRESET = "agent.preset=fast"


def minigrid_arm(fast: Arm, directory: str) -> Arm:
    """``fast`` with the minigrid preset in place of the fast one, into ``directory``."""
    overrides = tuple("agent.preset=minigrid" if override == FAST_PRESET else override
                      for override in fast.overrides)
    if overrides == fast.overrides:
        raise ValueError(f"{fast.name} does not ask for {FAST_PRESET}")
    return dataclasses.replace(fast, name="minigrid preset", overrides=overrides,
                               directory=directory)


CHECKS = {
    "lstm": Comparison(RESULTS.name, minigrid_arm(COMPILED, "minigrid"),
                       dataclasses.replace(COMPILED, name="fast preset")),
    "relstm": Comparison(RESULTS.name, minigrid_arm(FUSED, "relstm_minigrid"),
                         dataclasses.replace(FUSED, name="fast preset")),
}
"""Each cell's comparison: the minigrid arm (old) and the fast arm (new), whose runs are the
named arms' (only the names they print change)."""


def rule_line(memory: str, check: Comparison) -> str:
    """The rule's line for ``memory`` on seeds 3-17 (:func:`~experiments.fast_trainer.
    more_seeds.rule_line`): whether its learning is unchanged."""
    return more_seeds.rule_line(check, env_values(check, ALL_SEEDS), ALL_SEEDS,
                                "learning unchanged", "the fast preset learns worse",
                                title=f"rule for {memory}")


def results_page(lines: Sequence[str]) -> str:
    """``FAST_DEFAULT.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "The fast preset against today's minigrid preset, lstm and relstm, on fifteen seeds",
        "fast_default",
        "the minigrid preset's runs are in `learning_runs/<env>/minigrid/seed<k>/` (lstm) and "
        "`learning_runs/<env>/relstm_minigrid/seed<k>/`, the fast preset's in "
        "`learning_runs/<env>/fast_compiled_lstm/seed<k>/` and "
        "`learning_runs/<env>/relstm_fast_fused/seed<k>/`", lines, memory="lstm and relstm",
        seeds=ALL_SEEDS)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring; ``--seeds``, ``--envs`` and ``--memories`` pick a
    part of the runs to train)."""
    parser = comparison_parser(__doc__.split("\n\n")[0], RUNS, CASES, ALL_SEEDS, RESULTS)
    parser.add_argument("--memories", nargs="+", default=list(CHECKS), choices=list(CHECKS))
    args = parser.parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]
    failed = 0
    for memory in [] if args.no_train else args.memories:
        code = train_arms(args, (CHECKS[memory].old, CHECKS[memory].new), cases, memory)
        if code == INTERRUPTED:
            return code
        failed += code
    lines = [line for memory in args.memories
             for line in check_lines(args, cases, failed, CHECKS[memory], memory,
                                     partial(rule_line, memory, CHECKS[memory]),
                                     title=f"rule for {memory}")]
    return reported(lines, failed, RESULTS if args.write else None, results_page(lines))


if __name__ == "__main__":
    exit_passing_signals_on(main)

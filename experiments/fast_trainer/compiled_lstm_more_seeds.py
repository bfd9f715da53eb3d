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
if p ≥ :data:`LEVEL`, so that a change that learns alike is called harmful in 5% of the
checks, not one in four; otherwise it stays off, selectable. With a run missing or failed,
nothing is decided. Seeds 3-7's runs are the first check's, as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.common.arm_runs import comparison_parser, reported
from experiments.common.signal_relay import exit_passing_signals_on
from experiments.fast_trainer.compiled_lstm import COMPILED
from experiments.fast_trainer.folded_grid import FOLDED
from experiments.fast_trainer.learning import (
    CASES,
    HERE,
    RUNS,
    SEEDS,
    compare,
    comparison_page,
    train_arms,
)
from experiments.fast_trainer.rule_calibration import Comparison, calibration, env_values
from rlmem.runs import INTERRUPTED

RESULTS = HERE / "COMPILED_LSTM_MORE_SEEDS.md"
ADDED_SEEDS = tuple(range(8, 18))
"""The seeds this check trains: none of them used by tuning or by an earlier check."""
ALL_SEEDS = (*SEEDS, *ADDED_SEEDS)
"""The seeds the rule decides on: the first check's and the added ones."""
LEVEL = 0.05
"""The p-value below which the compiled loop is taken to learn worse (the rule)."""
CHECK = Comparison(RESULTS.name, FOLDED, COMPILED)


def decision_line(values: list[dict[str, dict[str, list[float | None]]]],
                  seeds: Sequence[int] = ALL_SEEDS) -> str:
    """The rule's statistic over each env's measures ``values`` at ``seeds``
    (:func:`~experiments.fast_trainer.rule_calibration.env_values`), its p-value, the first
    check's rule's false-failure rate on these runs (the share of relabelings with an interval
    below ½), and what the rule decides."""
    lowest, old_rule_rate, p = calibration(CHECK, values, paired=True)
    verdict = "decided on" if p >= LEVEL else "stays off"
    return (f"rule on seeds {seeds[0]}-{seeds[-1]}: lowest upper bound of the six P intervals "
            f"{lowest:.2f}, paired permutation p = {p:.3f} (level {LEVEL}); the first check's "
            f"rule (every interval containing 1/2) would fail on {old_rule_rate:.3f} of the "
            f"relabelings; agent.compiled_lstm: {verdict}")


def results_page(lines: Sequence[str]) -> str:
    """``COMPILED_LSTM_MORE_SEEDS.md``: what was compared, how, and the comparison's lines."""
    return comparison_page(
        "The LSTM's chunks in the compiled loop against torch's kernel per segment, at the "
        "fast preset, on fifteen seeds", "compiled_lstm_more_seeds",
        "the runs are in `learning_runs/<env>/fast_folded/seed<k>/` (torch's kernel) and "
        "`learning_runs/<env>/fast_compiled_lstm/seed<k>/`", lines, seeds=ALL_SEEDS)


def main(argv: Sequence[str] | None = None) -> int:
    """The command (the module docstring): ``--seeds`` picks among the added seeds to train;
    the rule decides only on every run of :data:`ALL_SEEDS` at the full budgets."""
    parser = comparison_parser(__doc__.split("\n\n")[0], RUNS, CASES, ADDED_SEEDS, RESULTS)
    args = parser.parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]
    failed = 0 if args.no_train else train_arms(args, (FOLDED, COMPILED), cases)
    if failed == INTERRUPTED:
        return failed
    lines = [line for case in cases
             for line in compare(args.runs, FOLDED, COMPILED, case, args.frames or case.frames,
                                 seeds=ALL_SEEDS)]
    if failed or args.frames or args.runs != RUNS or len(cases) != len(CASES):
        lines.append("rule: not applied (a part of the check, or a run failed)")
    else:
        try:
            lines.append(decision_line(env_values(CHECK, ALL_SEEDS)))
        except ValueError as missing:  # a run not trained or not evaluated yet
            lines.append(f"rule: not applied yet ({missing})")
    return reported(lines, failed, RESULTS if args.write else None, results_page(lines))


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""A learning check on more seeds (issue 59): a check whose rule failed on the test seeds 3-7
trains its two arms on ten more seeds, 8-17, which no tuning and no check has used, and is
decided on all fifteen by a rule whose false-failure rate is fixed before its runs.

The rule, the same for every such check and written into each one's module before its runs:
the statistic is the lowest upper bound of the six P(new ≥ old) 95% intervals (the three
measures of :mod:`~experiments.fast_trainer.learning` on DoorKey-5x5 and on MemoryS7) over the
seeds 3-17; its p-value is the share of the paired relabelings whose statistic is at or below
the observed one (every swap of the arms within any set of seeds, 2¹⁵ an env, the two envs
relabeled independently: :mod:`~experiments.fast_trainer.rule_calibration`'s measurement 2,
exact). The key is decided on if p ≥ :data:`LEVEL`, so that a change that learns alike is
called harmful in 5% of the checks (the first rule, every interval containing ½, called it so
about one time in four, ``RULE_CALIBRATION.md``); otherwise it stays off. With a run missing or
failed, nothing is decided.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from experiments.common.arm_runs import Case, comparison_parser, reported
from experiments.fast_trainer.learning import CASES, RUNS, SEEDS, compare, train_arms
from experiments.fast_trainer.rule_calibration import Comparison, calibration, env_values
from rlmem.runs import INTERRUPTED

ADDED_SEEDS = tuple(range(8, 18))
"""The seeds such a check trains: none of them used by tuning or by an earlier check."""
ALL_SEEDS = (*SEEDS, *ADDED_SEEDS)
"""The seeds the rule decides on: the first check's and the added ones."""
LEVEL = 0.05
"""The p-value below which the new arm is taken to learn worse (the rule)."""


def decision_line(check: Comparison, key: str,
                  values: list[dict[str, dict[str, list[float | None]]]],
                  seeds: Sequence[int] = ALL_SEEDS) -> str:
    """:func:`rule_line` for a kernel's key: ``agent.<key>`` decided on, or staying off."""
    return rule_line(check, values, seeds, f"agent.{key}: decided on",
                     f"agent.{key}: stays off")


def rule_line(check: Comparison, values: list[dict[str, dict[str, list[float | None]]]],
              seeds: Sequence[int], passing: str, failing: str, title: str = "rule") -> str:
    """The rule's statistic over each env's measures ``values`` at ``seeds``
    (:func:`~experiments.fast_trainer.rule_calibration.env_values`), its p-value, the first
    rule's false-failure rate on these runs (the share of relabelings with an interval below
    ½), and ``passing`` where p ≥ :data:`LEVEL`, else ``failing``; the line begins with
    ``title``."""
    lowest, first_rule_rate, p = calibration(check, values, paired=True)
    return (f"{title} on seeds {seeds[0]}-{seeds[-1]}: lowest upper bound of the six P "
            f"intervals {lowest:.2f}, paired permutation p = {p:.3f} (level {LEVEL}); the "
            f"first check's rule (every interval containing 1/2) would fail on "
            f"{first_rule_rate:.3f} of the relabelings; {passing if p >= LEVEL else failing}")


def check_lines(args: argparse.Namespace, cases: Sequence[Case], failed: int,
                check: Comparison, memory: str, ruled: Callable[[], str],
                title: str = "rule") -> list[str]:
    """``check``'s comparison lines over :data:`ALL_SEEDS` (its runs of ``memory`` on
    ``cases``, at the frames of ``args``), then ``ruled()`` (the rule's line) where the whole
    check ran at its budgets with no run failed (``failed``), else why the rule waits; each
    such line begins with ``title``."""
    lines = [line for case in cases
             for line in compare(args.runs, check.old, check.new, case,
                                 args.frames or case.frames, memory, ALL_SEEDS)]
    if failed or args.frames or args.runs != RUNS or len(cases) != len(CASES):
        lines.append(f"{title}: not applied (a part of the check, or a run failed)")
        return lines
    try:
        lines.append(ruled())
    except ValueError as missing:  # a run not trained or not evaluated yet
        lines.append(f"{title}: not applied yet ({missing})")
    return lines


def main_more_seeds(argv: Sequence[str] | None, description: str, check: Comparison, key: str,
                    results: Path, page: Callable[[Sequence[str]], str], memory: str) -> int:
    """The command of ``check``'s runs on more seeds, both arms with ``memory``: train and
    evaluate what is left of :data:`ADDED_SEEDS` (``--seeds``: a part of them), print the
    comparison over :data:`ALL_SEEDS` and the rule's decision for ``agent.<key>`` (only on
    every run at the full budgets) and, with ``--write``, write ``page(lines)`` into
    ``results``."""
    parser = comparison_parser(description, RUNS, CASES, ADDED_SEEDS, results)
    args = parser.parse_args(argv)
    cases = [case for case in CASES if case.env in args.envs]
    failed = 0 if args.no_train else train_arms(args, (check.old, check.new), cases, memory)
    if failed == INTERRUPTED:
        return failed
    lines = check_lines(args, cases, failed, check, memory,
                        lambda: decision_line(check, key, env_values(check, ALL_SEEDS)))
    return reported(lines, failed, results if args.write else None, page(lines))

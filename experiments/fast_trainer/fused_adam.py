"""Does Adam's fused kernel learn as its ``foreach`` steps do? relstm on DoorKey-5x5, the
default path, the two kernels (``agent.fused_adam``), every other setting equal.

    python -m experiments.fast_trainer.fused_adam            # the table, from the runs kept
    python -m experiments.fast_trainer.fused_adam --write    # ... into FUSED_ADAM.md

The runs were made by hand (the commands are in ``FUSED_ADAM.md``) and are kept in
``fused_adam_runs/<arm>/<setting>_seed<k>/`` (``config.yaml`` and ``progress.csv``): ``arm`` one
of :data:`ARMS`, ``setting`` the envs they stepped (``tensor``, the default, or
``gymnasium``). For each run: its frames, the last ``return_recent`` (the mean return of the
last 100 episodes) and the frames at which ``return_recent`` first reached 0.9.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from rlmem.runs.progress import read_progress

HERE = Path(__file__).resolve().parent
RUNS = HERE / "fused_adam_runs"
RESULTS = HERE / "FUSED_ADAM.md"
ARMS = ("fused", "foreach", "foreach_lr_perturbed", "fused_marked")
"""The folders of ``fused_adam_runs``: the fused kernel as it was; the ``foreach`` steps; the
``foreach`` steps with ``agent.lr=0.0010000001`` (a perturbation of the arithmetic, to see
whether any change of rounding loses the task); the fused kernel once the weights it
writes were marked as changed (made when ``PPO.step`` marked them; the weight cache has since
renewed itself after any torch optimizer's step, ``rlmem/cells/_engines/weight_cache.py``)."""
THRESHOLD = 0.9


def row(run: Path) -> str:
    """One run's line of the table."""
    rows = read_progress(run / "progress.csv")
    returns = [(int(row.number("frames")), row.number("return_recent")) for row in rows]
    reached = next((frames for frames, value in returns if value >= THRESHOLD), None)
    frames, last = returns[-1]
    return (f"| {run.parent.name} | {run.name} | {frames:,} | {last:.3f} | "
            f"{f'{reached:,}' if reached is not None else 'not reached'} |")


def table(root: Path) -> list[str]:
    """Every run under ``root``, arm by arm."""
    lines = ["| kernel | run | frames | last return_recent | frames to 0.9 |",
             "|---|---|---:|---:|---:|"]
    for arm in ARMS:
        lines += [row(run) for run in sorted((root / arm).glob("*_seed*"))]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--write", action="store_true", help=f"fill the table into {RESULTS.name}")
    args = parser.parse_args(argv)
    lines = table(args.runs)
    print("\n".join(lines))
    if args.write:
        text = RESULTS.read_text()
        start, end = text.index("<!-- table -->"), text.index("<!-- /table -->")
        RESULTS.write_text(text[:start] + "<!-- table -->\n" + "\n".join(lines) + "\n"
                           + text[end:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

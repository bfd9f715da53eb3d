"""Does a run still meet its target on batches that did not decide its stop?

    OMP_NUM_THREADS=1 python -m experiments.supervised.fresh_eval
    OMP_NUM_THREADS=1 python -m experiments.supervised.fresh_eval --runs runs/<preset>/seed0

A run stops at the first evaluation whose score on its held-out batch at the training T meets
the target (99% recall, or an MSE of 0.01). Picking the first of many noisy evaluations that
crosses a line makes that score optimistic: a run hovering around 98.9% stops on a lucky 99.0%.
This script re-evaluates every finished run that kept its checkpoint (or the given ``--runs``)
on ``--batches`` new batches of the run's evaluation size at its training T, and records their
scores. They are confirmation batches (:func:`rlmem.tasks.held_out.confirmation_seed`) that no
evaluation of the run used: those after the ones its own stop rule drew (``confirm_batches``).
The transfer lengths need no such check: their batches never decide the stop.

Writes the scores, unrounded, to ``fresh_eval.json`` (:data:`DATA`; a run checked again
replaces its entry, the others stay), which ``aggregate.py`` reads: RESULTS.md quotes every
run at its training T on these batches. ``FRESH_EVAL.md`` (``--out``) shows them all.

A run written by an older rlmem (an older checkpoint format) is migrated in a temporary copy
(``rlmem.migrate``), so no file of the run is changed; about 6 s a run on one core.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from experiments.common.report import mse, percent
from experiments.supervised.rows import HERE, ROWS, RUNS
from rlmem.migrate import migrate_run
from rlmem.runs import CHECKPOINT_NAME
from rlmem.runs.arithmetic import FLUSH_KEY, subnormal_floats
from rlmem.runs.checkpoint import OlderCheckpointError
from rlmem.tasks.held_out import confirmation_score
from rlmem.tasks.saved import SavedModel, load_saved_model

DATA = HERE / "fresh_eval.json"
"""Every check made, by run (``<preset>/seed<k>``): the data RESULTS.md quotes."""


@dataclass(frozen=True)
class Check:
    """One run's model at its end, scored on fresh batches at its training T."""

    run: str
    """``<preset>/seed<k>``, relative to the suite's runs."""
    metric: str
    seq_len: int
    target: float | None
    iterations: int
    """The iterations its ``results.json`` records: a later result makes this check stale."""
    converged_at: int | None
    reported: float
    """The score its ``results.json`` reports at the training T (the stop's batch)."""
    scores: list[float]
    """Each fresh batch's score."""
    pooled: float
    """The fresh batches pooled: the score RESULTS.md quotes."""
    meets: bool | None
    """Whether ``pooled`` meets the target, by the task's own rule (None: no target)."""


def saved_model(run_dir: Path) -> SavedModel:
    """The run's model; one of checkpoint format 2 is migrated in a temporary copy."""
    try:
        return load_saved_model(run_dir)
    except OlderCheckpointError:
        with tempfile.TemporaryDirectory(prefix="fresh-eval-") as scratch:
            copy = Path(scratch) / run_dir.name
            copy.mkdir()
            for name in (CHECKPOINT_NAME, "config.yaml", "results.json"):
                if (run_dir / name).exists():
                    shutil.copy2(run_dir / name, copy / name)
            migrate_run(copy)
            return load_saved_model(copy)


def check(run_dir: Path, batches: int, name: str | None = None) -> Check:
    """The run's model scored on ``batches`` fresh batches at its training T; ``name`` is how
    the data file keys it (default: its path)."""
    results = json.loads((run_dir / "results.json").read_text())
    saved = saved_model(run_dir)
    task, config = saved.task, saved.config
    seq_len = int(config["seq_len"])
    key = f"{task.score}@T{seq_len}"
    # The stop rule of the run's latest start (config.yaml), which may have confirmed a stop
    # that an earlier config (the checkpoint's) made: its batches are skipped.
    latest = OmegaConf.load(run_dir / "config.yaml")
    first = int(latest.confirm_batches) if "confirm_batches" in latest else 0
    # With the arithmetic the run trained and was evaluated with.
    with subnormal_floats(bool(config[FLUSH_KEY])):
        fresh = confirmation_score(saved.model, task, seq_len, batches,
                                   int(config["eval_batch_size"]), saved.seed,
                                   torch.device("cpu"), amp=bool(config["amp"]), first=first)
    target = None if config.get("target") is None else float(config["target"])
    return Check(name or run_dir.as_posix(), task.score, seq_len, target,
                 int(results["iterations"]), results.get("converged_at"),
                 float(results["eval"][key]),
                 [float(score) for score in fresh.scores], float(fresh.pooled),
                 None if target is None else bool(task.reached(fresh.pooled, target)))


def finished_runs(runs: Path) -> list[Path]:
    """Every run of the suite's rows with a ``results.json`` that did not diverge (met its
    target or spent its budget): the runs RESULTS.md quotes."""
    found = []
    for row in ROWS:
        for seed in range(row.seeds):
            path = row.run_dir(seed, runs) / "results.json"
            if path.exists() and not json.loads(path.read_text()).get("diverged"):
                found.append(path.parent)
    return found


def read_checks(path: Path = DATA) -> dict[str, Check]:
    """The checks recorded in ``path``, by run (none if it does not exist)."""
    if not path.exists():
        return {}
    raw: dict[str, dict[str, Any]] = json.loads(path.read_text())["runs"]
    return {name: Check(**entry) for name, entry in raw.items()}


def write_checks(checks: dict[str, Check], batches: int, path: Path = DATA) -> None:
    path.write_text(json.dumps({"batches": batches, "runs": {
        name: asdict(checks[name]) for name in sorted(checks)}}, indent=1) + "\n")


def fmt(metric: str, value: float) -> str:
    """A score as RESULTS.md prints it (:mod:`experiments.common.report`)."""
    return mse(value) if metric == "mse" else percent(value)


def line(result: Check) -> str:
    """The run's row of FRESH_EVAL.md."""
    sign = "≤" if result.metric == "mse" else "≥"
    target = "none (a fixed budget)" if result.target is None else \
        f"{result.metric} {sign} {fmt(result.metric, result.target)} at T={result.seq_len}"
    meets = "—" if result.meets is None else "yes" if result.meets else "no"
    return (f"| `{result.run}` | {target} | {result.converged_at or '—'} | "
            f"{fmt(result.metric, result.reported)} | {fmt(result.metric, result.pooled)} | "
            f"{', '.join(fmt(result.metric, value) for value in result.scores)} | {meets} |")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", nargs="+", type=Path, help="run directories (default: every "
                        "finished run of the suite that kept its checkpoint)")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--out", type=Path, default=HERE / "FRESH_EVAL.md")
    parser.add_argument("--data", type=Path, default=DATA, help="the checks' data file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.runs:
        run_dirs = [path.resolve() for path in args.runs]
        missing = [str(path) for path in run_dirs if not (path / CHECKPOINT_NAME).exists()
                   or not (path / "results.json").exists()]
        if missing:
            parser.error(f"no finished run (checkpoint.pt and results.json) in: "
                         f"{', '.join(missing)}")
        unkept = []
    else:  # git keeps no finished run's checkpoint (experiments/README.md): those on disk
        found = finished_runs(RUNS)
        run_dirs = [path for path in found if (path / CHECKPOINT_NAME).exists()]
        unkept = [path for path in found if path not in run_dirs]
    checks = read_checks(args.data)
    for run_dir in run_dirs:
        name = (run_dir.relative_to(RUNS) if run_dir.is_relative_to(RUNS) else run_dir)
        result = check(run_dir, args.batches, name.as_posix())
        checks[result.run] = result
        print(line(result), flush=True)
        write_checks(checks, args.batches, args.data)
    lines = [
        "# Finished runs re-evaluated on fresh batches",
        "",
        "Generated by `python -m experiments.supervised.fresh_eval` (its docstring says why)",
        "from its data, `fresh_eval.json`, which RESULTS.md quotes. Each run's model at its end,",
        f"at its training T, on {args.batches} new batches of its evaluation size (256 sequences",
        "each), from generators none of its evaluations use.",
        "",
        "| run | target | met at iteration | reported (the batch that decided the stop) "
        "| fresh batches, pooled | fresh batches, each | meets the target on them |",
        "|---|---|---:|---:|---:|---:|---|",
        *(line(checks[name]) for name in checks),
        *(f"| `{path.relative_to(RUNS).as_posix()}` | — | — | — | — | — | its checkpoint was "
          "not kept |" for path in unkept if path.relative_to(RUNS).as_posix() not in checks),
    ]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

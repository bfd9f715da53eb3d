"""Where one run of the suite stands: finished, in progress, running elsewhere, or not started.

Read from what ``python -m rlmem.supervised`` leaves in its run directory, without writing
there: ``results.json`` (written only when a run ends: its budget spent or its target met),
``config.yaml`` (the budget of the latest start), ``progress.csv`` (the last logged iteration)
and the run lock ``.lock`` (held by a live process; probed with a shared lock, which a running
run's exclusive lock refuses).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlmem.runs.lock import lock_holder
from rlmem.runs.progress import ProgressRow, read_progress


class State(Enum):
    finished = "finished"
    """``results.json`` of a run that met its target, spent its budget or diverged."""
    in_progress = "in progress"
    """Started (a checkpoint or a progress row) but not finished: resumable."""
    not_started = "not started"


@dataclass(frozen=True)
class RunStatus:
    """One run directory, as the suite and the aggregate see it."""

    run_dir: Path
    state: State
    iteration: int
    """Iterations trained (results.json when finished, else the last progress row; 0)."""
    cpu_s: float
    """CPU seconds spent so far (results.json when finished, else the last progress row)."""
    results: dict[str, Any] | None
    """``results.json`` when finished."""
    holder: str | None
    """PID of the live process running it now, if any."""
    on_gpu: bool
    """Whether its latest start asked for a GPU (``device=cuda`` in ``config.yaml``): then its
    minutes are a GPU's, not one core's."""

    @property
    def diverged(self) -> str | None:
        """The error that stopped a diverged run (a non-finite loss or gradient), else None."""
        return self.results.get("diverged") if self.results else None

    def describe(self) -> str:
        """A few words for the suite's log and the in-progress list."""
        if self.state is State.finished:
            assert self.results is not None
            if self.diverged:
                return f"finished: diverged after {self.iteration} iterations"
            met = self.results.get("converged_at")
            if met is not None:
                return f"finished: target met at iteration {met}"
            if self.results.get("target") is None:
                return f"finished: {self.iteration} iterations (a fixed budget, no target)"
            return f"finished: {self.iteration} iterations, target not met"
        running = f", running now (PID {self.holder})" if self.holder else ""
        if self.state is State.in_progress:
            return f"in progress at iteration {self.iteration}{running}"
        return f"not started{running}"


def last_progress(run_dir: Path) -> ProgressRow | None:
    """The last row of ``progress.csv`` (None before the first logged iteration)."""
    path = run_dir / "progress.csv"
    rows = read_progress(path) if path.exists() else []
    return rows[-1] if rows else None


@dataclass(frozen=True)
class LatestStart:
    """What a run's ``config.yaml`` says of its latest start, read once."""

    budget: int | None
    """``iterations``; None before the first start."""
    on_gpu: bool
    """``device=cuda`` (or ``cuda:<k>``)."""


def latest_start(run_dir: Path) -> LatestStart:
    """The budget and device of the run's latest start (its ``config.yaml``)."""
    path = run_dir / "config.yaml"
    if not path.exists():
        return LatestStart(None, False)
    config = OmegaConf.load(path)
    if not isinstance(config, DictConfig):
        raise ValueError(f"{path} holds no mapping, so it is no run's config")
    return LatestStart(int(config.iterations), str(config.get("device")).startswith("cuda"))


def run_status(run_dir: Path, budget: int | None = None) -> RunStatus:
    """Where ``run_dir`` stands against ``budget`` iterations (default: its own config's).

    A ``results.json`` counts as finished when its run met its target, trained at least
    ``budget`` iterations, or diverged (the same config and seed would diverge again); one left
    from a smaller budget is a run in progress.
    """
    start = latest_start(run_dir)
    budget = budget if budget is not None else start.budget
    holder = lock_holder(run_dir)
    results_path = run_dir / "results.json"
    if results_path.exists():
        results = json.loads(results_path.read_text())
        if results.get("converged_at") is not None or results.get("diverged") or (
                budget is not None and results["iterations"] >= budget):
            return RunStatus(run_dir, State.finished, int(results["iterations"]),
                             float(results["cpu_s"]), results, holder, start.on_gpu)
    row = last_progress(run_dir)
    if row is not None or (run_dir / "checkpoint.pt").exists():
        return RunStatus(run_dir, State.in_progress,
                         int(row.number("iteration", 0.0)) if row is not None else 0,
                         row.number("time/cpu_s", 0.0) if row is not None else 0.0, None,
                         holder, start.on_gpu)
    return RunStatus(run_dir, State.not_started, 0, 0.0, None, holder, start.on_gpu)

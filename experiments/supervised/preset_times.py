"""How long each supervised preset takes on this machine: from its runs here, or a measured prefix.

    python -m experiments.supervised.preset_times                 # the table, written to the JSON
    python -m experiments.supervised.preset_times --measure NAME --iterations 120

A preset's time comes from its runs in :data:`rows.RUNS` (``runs/<preset>/seed<k>/``) on this
machine's CPU (a run whose latest start asked for a GPU is left out): each run's wall and CPU
time (``results.json``, else its last ``progress.csv`` row; both count every start of a resumed
run), how it ended, and its seconds per iteration, which times the preset's budget
(``iterations``) give the cost of a run that never meets its target. The wall time depends on
the load the run met (this machine is shared); the CPU time is what one idle core would take.
Runs whose ``config.yaml`` differs from the preset in a setting that sets the cost
(:data:`COST_KEYS`) are left out. A preset with no such run is measured: ``--measure`` runs its
first iterations (the preset's settings, in a temporary folder, evaluation off until the end)
in a process of its own, records the load average before and after, and the table extrapolates
from the wall and CPU seconds per iteration between its first and last logged rows (startup and
the first compile left out).

Every number is written to :data:`TIMES` (``preset_times.json``), which the documentation's
presets page (``docs/hooks/presets.py``) reads for its "time here" column; measurements are
kept there, the runs are read again at each writing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

from experiments.common.signal_relay import exit_passing_signals_on, run_child
from experiments.supervised.rows import CONF, PRESET_DIRS, REPO, RUNS, searchpath
from experiments.supervised.status import last_progress, run_status
from rlmem.runs.progress import read_progress
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.supervised import register_supervised_configs

HERE = Path(__file__).resolve().parent
TIMES = HERE / "preset_times.json"
"""The table's data: per preset, its runs' times or its measured prefix, and the summary."""
COST_KEYS = ("task.name", "memory.name", "seq_len", "batch_size", "memory.hidden_size")
"""The settings a run must share with its preset for its time to stand for the preset's."""
LONG_ENOUGH = 100
"""The iterations a run needs before its seconds per iteration time a whole budget (a run that
diverged at its 4th iteration timed mostly its start)."""


def composed(preset: str, *overrides: str) -> DictConfig:
    """The preset's config, as ``python -m rlmem.supervised +preset=<preset>`` composes it."""
    register_supervised_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="supervised",
                       overrides=[searchpath(CONF), f"+preset={preset}", *overrides])


def cost_settings(config: DictConfig) -> dict[str, Any]:
    """The values of :data:`COST_KEYS` in ``config``."""
    return {key: OmegaConf.select(config, key) for key in COST_KEYS}


def run_record(run_dir: Path) -> dict[str, Any] | None:
    """One run's time and ending (``results.json`` when it ended, else its last logged row),
    or None before either."""
    status = run_status(run_dir)
    results = status.results
    row = last_progress(run_dir)
    if results is not None:
        iterations, wall, cpu = results["iterations"], results["elapsed_s"], results["cpu_s"]
    elif row is not None:
        iterations = int(row.number("iteration"))
        wall, cpu = row.number("time/elapsed_s"), row.number("time/cpu_s")
    else:
        return None
    ended = ("unfinished" if results is None else "diverged" if results.get("diverged")
             else "target met" if results.get("converged_at") is not None else "budget spent")
    return {"run": str(run_dir.relative_to(REPO)), "iterations": iterations,
            "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "on_gpu": status.on_gpu,
            "s_per_iteration": wall / max(iterations, 1),
            "cpu_s_per_iteration": cpu / max(iterations, 1), "ended": ended}


def runs_of(preset: str, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs of ``preset`` here, on this machine's CPU, whose cost settings are the
    preset's."""
    records = []
    for run_dir in sorted((RUNS / preset).glob("seed*")):
        config_path = run_dir / "config.yaml"
        if not config_path.exists():
            continue
        config = OmegaConf.load(config_path)
        record = run_record(run_dir)
        if (isinstance(config, DictConfig) and record and not record["on_gpu"]
                and cost_settings(config) == settings):
            records.append(record)
    return records


def measure(preset: str, iterations: int) -> dict[str, Any]:
    """Run the first ``iterations`` of ``preset`` in a process of its own and time them."""
    log_every = max(iterations // 10, 1)
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        command = [sys.executable, "-m", "rlmem.supervised", searchpath(CONF),
                   f"+preset={preset}", f"iterations={iterations}", f"log_every={log_every}",
                   f"eval_every={iterations}", f"checkpoint_every={iterations}",
                   f"transfer_every={iterations}", "eval_seq_lens=[]", "figures=false",
                   "progress_bar=false", "resume=false", f"run_dir={run_dir}"]
        load = [os.getloadavg()[0]]
        start = time.perf_counter()
        if run_child(command, stdout=subprocess.DEVNULL) != 0:
            raise RuntimeError(f"{' '.join(command)} failed")
        wall = time.perf_counter() - start
        load.append(os.getloadavg()[0])
        rows = [row for row in read_progress(run_dir / "progress.csv")
                if row.finite("train/loss") is not None]
    first, last = rows[0], rows[-1]

    def per_iteration(column: str) -> float:
        return ((last.number(column) - first.number(column))
                / (last.number("iteration") - first.number("iteration")))

    return {"iterations": iterations, "wall_s": round(wall, 1),
            "s_per_iteration": per_iteration("time/elapsed_s"),
            "cpu_s_per_iteration": per_iteration("time/cpu_s"), "load": load,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": " ".join(command[1:-1]).replace(f"{REPO}/", "")}


def duration(seconds: float) -> str:
    """``seconds`` in words a reader takes in at once: 40 s, 7 min, 1 h 38 min."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def from_runs(runs: Sequence[dict[str, Any]], budget: int) -> str:
    """The time of a preset, in words, from its ``runs`` here."""
    walls = sorted(run["wall_s"] for run in runs)
    cpus = sorted(run["cpu_s"] for run in runs)
    endings = [run["ended"] for run in runs]
    ended = ", ".join(f"{endings.count(end)} {end}" for end in dict.fromkeys(endings))
    if len(runs) == 1:
        summary = (f"1 run here (`{runs[0]['run']}`, {ended}): {duration(walls[0])} wall, "
                   f"{duration(cpus[0])} CPU")
    else:
        summary = (f"{len(runs)} runs here (`{Path(runs[0]['run']).parent}/seed*`; {ended}): "
                   f"median {duration(statistics.median(walls))} wall ({duration(walls[0])} "
                   f"to {duration(walls[-1])}), {duration(statistics.median(cpus))} CPU")
    long_runs = [run for run in runs if run["iterations"] >= LONG_ENOUGH]
    if not long_runs:
        return summary
    wall = statistics.median(run["s_per_iteration"] for run in long_runs)
    cpu = statistics.median(run["cpu_s_per_iteration"] for run in long_runs)
    return (f"{summary}. The whole budget, {budget:,} iterations, at "
            f"{'that run’s' if len(long_runs) == 1 else 'their median'} pace: about "
            f"{duration(wall * budget)} wall, {duration(cpu * budget)} CPU")


def from_measurement(measured: dict[str, Any], budget: int) -> str:
    """The time of a preset, in words, from a measured prefix of it."""
    low, high = sorted(measured["load"])
    return (f"no run here yet. The whole budget, {budget:,} iterations: about "
            f"{duration(measured['s_per_iteration'] * budget)} wall at load {low:.1f}–{high:.1f}"
            f", {duration(measured['cpu_s_per_iteration'] * budget)} CPU, extrapolated from "
            f"{measured['iterations']:,} iterations measured on {measured['date']}")


def preset_names() -> Iterator[str]:
    """Every preset, the library's then the suite's, by name."""
    for folder in PRESET_DIRS:
        yield from (path.stem for path in sorted(folder.glob("*.yaml")))


def table(measured: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every preset's entry: its budget, its runs here, its measurement if any, its time."""
    entries = {}
    for name in preset_names():
        config = composed(name)
        budget = int(config.iterations)
        runs = runs_of(name, cost_settings(config))
        entry: dict[str, Any] = {"budget": budget, "runs": runs}
        if name in measured:
            entry["measured"] = measured[name]
        entry["time"] = (from_runs(runs, budget) if runs
                         else from_measurement(measured[name], budget) if name in measured
                         else "not measured yet")
        entries[name] = entry
    return entries


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--measure", nargs="*", default=[], metavar="PRESET",
                        help="measure a prefix of these presets and record it")
    parser.add_argument("--iterations", type=int, default=120,
                        help="the prefix --measure runs (default 120)")
    args = parser.parse_args(argv)
    known = json.loads(TIMES.read_text()) if TIMES.exists() else {}
    measured = {name: entry["measured"] for name, entry in known.items() if "measured" in entry}
    for name in args.measure:
        measured[name] = measure(name, args.iterations)
        print(f"{name}: {measured[name]}", flush=True)
    entries = table(measured)
    TIMES.write_text(json.dumps(entries, indent=1) + "\n")
    for name, entry in entries.items():
        print(f"{name}: {entry['time']}")
    print(f"written: {TIMES}")
    return 0


if __name__ == "__main__":
    exit_passing_signals_on(main)

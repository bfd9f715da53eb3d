"""Tabulate the memory suite into ``RESULTS.md`` and plot its learning curves.

    python -m experiments.memory.aggregate

Reads ``runs/MemoryS7/<label>/seed<k>/`` as written by ``suite.py``: ``progress.csv`` (the
learning curve; ``return_recent`` is the mean return of the last 100 training episodes) and
``eval/MemoryS7.json`` / ``eval/MemoryS13.json`` (evaluation episodes with sampled actions).
Writes ``RESULTS.md`` from ``RESULTS.template.md`` and ``curves.png``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
from omegaconf import DictConfig, OmegaConf

from experiments.memory.suite import LABELS
from rlmem.runs.progress import read_progress

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs" / "MemoryS7"
SOLVED = 0.9
"""The issue's bar: an evaluation return of at least this on MemoryS7."""

PAPER = {  # Kerg et al. (2020), Table 3: average reward after 5M frames of PPO
    "lstm": (0.96, 0.25), "memlstm": (0.40, 0.24), "relstm": (0.94, 0.30)}


@dataclass
class Run:
    """One seed of one label."""

    seed: int
    stop_return: float | None = None
    """The run's stop rule (the 1000-episode mean it stopped at; None: all frames)."""
    frames: list[float] = field(default_factory=list)
    recent: list[float] = field(default_factory=list)
    evaluations: dict[str, dict] = field(default_factory=dict)

    def frames_to(self, target: float) -> float | None:
        """Frames at which the 100-episode training mean first reached ``target``."""
        return next((f for f, r in zip(self.frames, self.recent, strict=True) if r >= target),
                    None)


def read_run(path: Path) -> Run:
    run = Run(int(path.name.removeprefix("seed")))
    if (path / "config.yaml").exists():
        config = OmegaConf.load(path / "config.yaml")
        assert isinstance(config, DictConfig)  # a run's config.yaml is a mapping
        run.stop_return = config.get("stop_return")
    if (path / "progress.csv").exists():
        for row in read_progress(path / "progress.csv"):
            value = row.finite("return_recent")
            if value is not None:
                run.frames.append(row.number("frames"))
                run.recent.append(value)
    for report in sorted((path / "eval").glob("*.json")):
        data = json.loads(report.read_text())
        if run.frames and data["frames"] == run.frames[-1]:  # not of an earlier checkpoint
            run.evaluations[data["env"]] = data
    return run


def collect() -> dict[str, list[Run]]:
    labels = sorted((p.name for p in RUNS.iterdir() if p.is_dir()),
                    key=lambda n: LABELS.index(n) if n in LABELS else len(LABELS)) \
        if RUNS.exists() else []
    return {label: [read_run(p) for p in sorted((RUNS / label).glob("seed*"))]
            for label in labels}


def spread(values: list[float], digits: int = 2, unit: str = "") -> str:
    """Mean ± sd of ``values`` (the value alone for one; a dash, without ``unit``, for none)."""
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}{unit}"
    return (f"{statistics.mean(values):.{digits}f} ± "
            f"{statistics.stdev(values):.{digits}f}{unit}")


def frames_cell(runs: list[Run]) -> str:
    reached = [run.frames_to(SOLVED) for run in runs]
    return ", ".join("—" if f is None else f"{f / 1e3:.0f}k" for f in reached)


def table(results: dict[str, list[Run]]) -> list[str]:
    lines = ["| cell | seeds | frames to 0.9 (per seed) | frames trained | MemoryS7 return | "
             "MemoryS7 success | solved (≥ 0.9) | MemoryS13 return | MemoryS13 success | "
             "paper S7 / S13 |", "|---|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for label, runs in results.items():
        evaluated = [r for r in runs if "MemoryS7" in r.evaluations]
        s7 = [r.evaluations["MemoryS7"] for r in evaluated]
        s13 = [r.evaluations["MemoryS13"] for r in runs if "MemoryS13" in r.evaluations]
        solved = sum(report["return_mean"] >= SOLVED for report in s7)
        trained = ", ".join(f"{r.frames[-1] / 1e3:.0f}k" for r in runs if r.frames) or "—"
        paper = PAPER.get(label)
        lines.append(
            f"| {label} | {len(runs)} | {frames_cell(runs)} | {trained} | "
            f"{spread([x['return_mean'] for x in s7])} | "
            f"{spread([100 * x['success_rate'] for x in s7], 0, '%')} | {solved}/{len(s7)} | "
            f"{spread([x['return_mean'] for x in s13])} | "
            f"{spread([100 * x['success_rate'] for x in s13], 0, '%')} | "
            f"{f'{paper[0]:.2f} / {paper[1]:.2f}' if paper else ''} |")
    return lines


def per_seed(results: dict[str, list[Run]]) -> list[str]:
    lines = ["| cell | seed | stop_return | frames to 0.9 | frames trained | S7 return | "
             "S7 success | S13 return | S13 success |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, runs in results.items():
        for run in runs:
            reached = run.frames_to(SOLVED)
            cells = [label, str(run.seed), "—" if run.stop_return is None else
                     f"{run.stop_return:.2f}", "—" if reached is None else f"{reached:.0f}",
                     f"{run.frames[-1]:.0f}" if run.frames else "—"]
            for env in ("MemoryS7", "MemoryS13"):
                report = run.evaluations.get(env)
                cells += ([f"{report['return_mean']:.3f}", f"{100 * report['success_rate']:.1f}%"]
                          if report else ["—", "—"])
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot(results: dict[str, list[Run]]) -> Path:
    figure, axes = plt.subplots(figsize=(7, 4))
    for index, (label, runs) in enumerate(results.items()):
        for k, run in enumerate(runs):
            axes.plot(run.frames, run.recent, color=f"C{index}", linewidth=1, alpha=0.85,
                      label=label if k == 0 else None)
    axes.axhline(SOLVED, color="grey", linestyle=":", linewidth=1)
    axes.set_xlabel("frames")
    axes.set_ylabel("mean return, last 100 training episodes")
    axes.set_title("MiniGrid MemoryS7: PPO, one line per seed")
    axes.set_ylim(0.3, 1.0)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, ncol=2, loc="lower right")
    figure.tight_layout()
    path = HERE / "curves.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


def main() -> None:
    results = collect()
    plot(results)
    template = (HERE / "RESULTS.template.md").read_text()
    text = (template.replace("{{table}}", "\n".join(table(results)))
            .replace("{{per_seed}}", "\n".join(per_seed(results))))
    (HERE / "RESULTS.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

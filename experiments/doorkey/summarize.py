"""Summarise DoorKey-5x5 runs: frames to a mean return of 0.9, learning curves, transfer.

    python -m experiments.doorkey.summarize runs/ppo/DoorKey-5x5/*/seed0

For each run directory it reads ``progress.csv`` and ``eval/DoorKey-16x16.json`` (if
``python -m rlmem.evaluate run=<dir> env=transfer`` ran) and writes, next to this script,
``summary.json`` (per run: frames at which ``return_recent``, the mean return of the last 100
episodes, first reached 0.9; the final one; mean fps; the transfer result), ``curves.csv`` (the
curves themselves, small) and ``curves.png``.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from omegaconf import OmegaConf

from rlmem.evaluate import report_path
from rlmem.runs.progress import read_progress

HERE = Path(__file__).resolve().parent
TARGET = 0.9
TRANSFER_ENV = "DoorKey-16x16"


def summarize(run: Path) -> tuple[dict[str, object], list[dict[str, float]]]:
    """The summary of one run and its curve (frames, return_recent, return_mean, fps)."""
    rows = [{key: row.number(key, math.nan) for key in ("frames", "return_recent",
                                                        "return_mean", "fps")}
            for row in read_progress(run / "progress.csv")]
    curve = [{"frames": row["frames"], "return_recent": row["return_recent"],
              "return_mean": row["return_mean"], "fps": row["fps"]} for row in rows]
    reached = next((row["frames"] for row in rows
                    if math.isfinite(row["return_recent"]) and row["return_recent"] >= TARGET),
                   None)
    memory = str(OmegaConf.load(run / "config.yaml").memory.name)
    summary: dict[str, object] = {
        "run": str(run), "memory": memory, "frames": rows[-1]["frames"],
        "frames_to_0.9": reached, "final_return_recent": rows[-1]["return_recent"],
        "mean_fps": sum(row["fps"] for row in rows) / len(rows)}
    transfer = report_path(run, TRANSFER_ENV)
    if transfer.exists():
        report = json.loads(transfer.read_text())
        summary["transfer"] = {key: report[key] for key in
                               ("env", "return_mean", "return_std", "success_rate",
                                "length_mean", "episodes", "argmax")}
    return summary, curve


def main(runs: list[Path]) -> None:
    summaries, figure = [], plt.figure(figsize=(6, 4))
    with (HERE / "curves.csv").open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["run", "frames", "return_recent",
                                                  "return_mean", "fps"])
        writer.writeheader()
        for run in runs:
            summary, curve = summarize(run)
            summaries.append(summary)
            for point in curve:
                writer.writerow({"run": f"{summary['memory']}/{run.name}", **point})
            plt.plot([p["frames"] for p in curve], [p["return_recent"] for p in curve],
                     label=f"{summary['memory']} ({run.name})")
    plt.axhline(TARGET, color="grey", linestyle=":", linewidth=1)
    plt.xlabel("frames")
    plt.ylabel("mean return, last 100 episodes")
    plt.title("DoorKey-5x5, our PPO")
    plt.legend()
    figure.tight_layout()
    figure.savefig(HERE / "curves.png", dpi=120)
    (HERE / "summary.json").write_text(json.dumps(summaries, indent=2))
    for summary in summaries:
        print(json.dumps(summary))


if __name__ == "__main__":
    main([Path(arg) for arg in sys.argv[1:]])

"""Frames per second of whole training runs with ``agent.processes`` 1 and 2 (and more, if
asked), the fast preset on the tensor envs, taking turns run by run.

    OMP_NUM_THREADS=1 python benchmarks/processes.py [--processes 1 2] [--rounds 3]

Each run is a ``python -m rlmem.train`` process of ``--frames`` frames into a temporary folder;
its frames/s is the frames of its updates after the first two (warm-up) over their seconds, as
``progress.csv`` times each update (rollout and PPO update; the start-up is not counted). The
settings take turns, so that the load of a shared machine hits them alike; the load average is
printed before and after.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WARM_UP = 2
"""Updates of each run left out of its frames/s."""


def frames_per_second(run_dir: Path) -> float:
    """The frames of a run's updates after :data:`WARM_UP` over their seconds: every update
    trains as many frames, so this is the harmonic mean of their ``fps``."""
    with (run_dir / "progress.csv").open() as file:
        rates = [float(row["fps"]) for row in csv.DictReader(file)][WARM_UP:]
    return len(rates) / sum(1 / rate for rate in rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["DoorKey-5x5", "MemoryS7"])
    parser.add_argument("--memory", default="lstm")
    parser.add_argument("--processes", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--frames", type=int, default=61_440)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[tuple[str, int], list[float]] = {}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="rlmem-processes-") as folder:
        for env in args.envs:
            for round_ in range(args.rounds):
                for processes in args.processes:
                    run_dir = Path(folder) / f"{env}-{processes}-{round_}"
                    subprocess.run(
                        [sys.executable, "-m", "rlmem.train", f"env={env}",
                         f"memory={args.memory}", "agent.preset=fast", "env_backend=tensor",
                         f"agent.processes={processes}", f"frames={args.frames}",
                         "progress_bar=false", f"run_dir={run_dir}"],
                        check=True, capture_output=True)
                    rates.setdefault((env, processes), []).append(frames_per_second(run_dir))
                    loads.append(os.getloadavg()[0])
    print(f"{args.memory}, agent.preset=fast env_backend=tensor, {args.frames} frames a run, "
          f"{args.rounds} runs of each setting taking turns; load average (1 min) "
          f"{min(loads):.2f} to {max(loads):.2f}\n")
    print("| env | " + " | ".join(f"processes={p} (frames/s)" for p in args.processes)
          + " | " + " | ".join(f"{p} / {args.processes[0]}" for p in args.processes[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(args.processes) - 1))
    for env in args.envs:
        means = [sum(rates[env, p]) / len(rates[env, p]) for p in args.processes]
        print(f"| {env} | " + " | ".join(f"{mean:.0f}" for mean in means) + " | "
              + " | ".join(f"{mean / means[0]:.2f}x" for mean in means[1:]) + " |")


if __name__ == "__main__":
    main()

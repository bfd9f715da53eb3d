"""Frames per second of our PPO's whole update (rollout, then the PPO update) with lstm's chunks
through torch's kernel once per reset-free segment and in one call of the compiled loops
(``agent.compiled_lstm``, :mod:`rlmem.cells._engines.lstm_chunk`), taking turns update by
update in one process, so that the load of a shared machine hits both alike; the load average
is printed before and after.

    OMP_NUM_THREADS=1 python benchmarks/compiled_lstm.py --updates 6

The fast preset (its envs, rollout, epochs, minibatches and learning values, the grid folded as
a run decides it) on DoorKey-5x5 and MemoryS7, twice: from the model's initialisation, where
the episodes are long and few resets cut the chunks, and from a run trained to a mean return
of 0.9 (the time-to-solve threshold), where the episodes are shorter than a chunk and nearly
every chunk is cut. Those runs are trained first, once, with ``python -m rlmem.train`` (the
fast preset, seed 0, ``stop_return=0.9``) into ``--trained`` (default: a folder under the
system's temporary directory), and reused from there.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from rlmem.agents.ppo.presets import PRESETS, Preset, agent_values
from rlmem.runs import CHECKPOINT_NAME

REPO = Path(__file__).resolve().parents[1]
ENVS = ("DoorKey-5x5", "MemoryS7")
SHAPE = {**agent_values(Preset.fast), "num_envs": PRESETS[Preset.fast].num_envs,
         "folded_grid": True}
"""The fast preset's work and learning values, the grid folded (its decided default)."""


def trained_weights(env: str, runs: Path) -> dict[str, torch.Tensor]:
    """The model of a fast-preset lstm run on ``env`` trained to a mean return of 0.9 (trained
    into ``runs/<env>`` unless it is there)."""
    run = runs / env
    if not (run / CHECKPOINT_NAME).exists():
        print(f"training {run} to a mean return of 0.9 ...", flush=True)
        subprocess.run([sys.executable, "-m", "rlmem.train", f"env={env}", "memory=lstm",
                        "agent.preset=fast", "env_backend=tensor", "seed=0",
                        "frames=2000000", "stop_return=0.9", f"run_dir={run}",
                        "progress_bar=false"], check=True, stdout=subprocess.DEVNULL,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
    checkpoint = torch.load(run / CHECKPOINT_NAME, map_location="cpu", weights_only=False)
    weights: dict[str, torch.Tensor] = checkpoint["states"]["model"]
    return weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=6, help="timed updates of each")
    parser.add_argument("--trained", type=Path,
                        default=Path(tempfile.gettempdir()) / "rlmem_compiled_lstm_runs",
                        help="where the trained runs are (or go)")
    args = parser.parse_args()
    if str(REPO) not in sys.path:  # run as python benchmarks/compiled_lstm.py
        sys.path.insert(0, str(REPO))
    from experiments.fast_trainer.speed import alternating_fps

    variants = {"kernel per segment": {**SHAPE, "compiled_lstm": False},
                "compiled chunk": {**SHAPE, "compiled_lstm": True}}
    names = list(variants)
    print(f"| env | weights | {' | '.join(f'{name} (frames/s)' for name in names)} | ratio | "
          "load before → after |")
    print("|---|---|---:|---:|---:|---|")
    for env in ENVS:
        for label, weights in (("initial", None),
                               ("trained to 0.9", trained_weights(env, args.trained))):
            before = os.getloadavg()[0]
            fps = alternating_fps(env, "lstm", variants, args.updates, weights=weights)
            print(f"| {env} | {label} | {' | '.join(f'{fps[name]:.0f}' for name in names)} | "
                  f"{fps[names[1]] / fps[names[0]]:.2f} | {before:.2f} → "
                  f"{os.getloadavg()[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()

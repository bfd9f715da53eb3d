"""Frames per second of our PPO's whole update (rollout, then the PPO update) with the
minibatch's gradient in one thread and in two (``agent.update_threads``,
:mod:`rlmem.agents.ppo.gradient_parts`), taking turns update by update in one process, so that
the load of a shared machine hits both alike; the load average is printed before and after.

    OMP_NUM_THREADS=1 python benchmarks/update_threads.py --updates 4

Each row is a shape of the work (envs, rollout, epochs, minibatch) on the tensor envs, lstm and
relstm, DoorKey-5x5 and MemoryS7: the presets', and minibatches of 512 (256 envs, rollouts of
16, 2 epochs: the fast preset's shape before it took 4 epochs of 256). The measure behind
:data:`rlmem.agents.ppo.config.MIN_FRAMES_PER_THREAD`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlmem.agents.ppo.presets import PRESETS, Preset

REPO = Path(__file__).resolve().parents[1]
LARGE_MINIBATCH = {"num_envs": 256, "frames_per_env": 16, "epochs": 2, "batch_size": 512}
"""Minibatches of 512 frames: the fast preset's shape before it took 4 epochs of 256."""

SHAPES = {"large minibatch": LARGE_MINIBATCH,
          **{f"{preset.name} preset": {key: getattr(PRESETS[preset], key) for key in
                                       ("num_envs", "frames_per_env", "epochs", "batch_size")}
             for preset in (Preset.fast, Preset.minigrid)}}
"""The shapes of the work measured, by name."""

ROWS = [(shape, env, memory) for shape in SHAPES for env in ("DoorKey-5x5", "MemoryS7")
        for memory in ("lstm", "relstm")]
"""(shape, env, cell) of each row."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=4, help="timed updates of each")
    args = parser.parse_args()
    if str(REPO) not in sys.path:  # run as python benchmarks/update_threads.py
        sys.path.insert(0, str(REPO))
    from experiments.fast_trainer.speed import print_variants_table

    print_variants_table(((name, SHAPES[name], env, memory, None) for name, env, memory in ROWS),
                         {"1 thread": {"update_threads": 1}, "2 threads": {"update_threads": 2}},
                         args.updates)


if __name__ == "__main__":
    main()

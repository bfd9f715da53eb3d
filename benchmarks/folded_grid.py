"""Frames per second of our PPO's whole update (rollout, then the PPO update) with the grid
encoder's modules and with its embedding and first convolution folded into one table lookup
(``agent.folded_grid``, :mod:`rlmem.agents.grid_fold`), taking turns update by update in one
process, so that the load of a shared machine hits both alike; the load average is printed
before and after.

    OMP_NUM_THREADS=1 python benchmarks/folded_grid.py --updates 6

Each row is a MiniGrid preset (its envs, rollout, epochs, minibatches, learning values and
memory size) on the tensor envs, with lstm and relstm on DoorKey-5x5 and MemoryS7, one thread.
The fold saves the same time per frame whatever the cell, so its share of an update shrinks as
the cell's grows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlmem.agents.ppo.presets import PRESETS, Preset, agent_values

REPO = Path(__file__).resolve().parents[1]

SHAPES = {f"{preset.name} preset": {**agent_values(preset), "num_envs": PRESETS[preset].num_envs}
          for preset in (Preset.fast, Preset.minigrid)}
"""Each MiniGrid preset's work and learning values, by name; the memory is the preset's size."""

ROWS = [(shape, env, memory) for shape in SHAPES for env in ("DoorKey-5x5", "MemoryS7")
        for memory in ("lstm", "relstm")]
"""(shape, env, cell) of each row."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=6, help="timed updates of each")
    parser.add_argument("--rows", type=int, default=len(ROWS), help="the first ROWS rows only")
    args = parser.parse_args()
    if str(REPO) not in sys.path:  # run as python benchmarks/folded_grid.py
        sys.path.insert(0, str(REPO))
    from experiments.fast_trainer.speed import print_variants_table

    print_variants_table(
        ((name, SHAPES[name], env, memory, PRESETS[Preset[name.split()[0]]].memory_size)
         for name, env, memory in ROWS[:args.rows]),
        {"modules": {"folded_grid": False}, "folded": {"folded_grid": True}}, args.updates)


if __name__ == "__main__":
    main()

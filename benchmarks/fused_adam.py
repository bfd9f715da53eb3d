"""Frames per second of our PPO's whole update (rollout, then the PPO update) with Adam's
``foreach`` steps and with its fused kernel (``agent.fused_adam``), taking turns update by
update in one process, so that the load of a shared machine hits both alike; the load average
is printed before and after.

    OMP_NUM_THREADS=1 python benchmarks/fused_adam.py --updates 4

Each row is a preset (its envs, rollout, epochs, minibatches, learning values and memory size)
on the tensor envs: the MiniGrid presets with lstm and relstm on DoorKey-5x5 and MemoryS7, the
generic preset with lstm and gtrxl on RepeatPreviousEasy. The optimizer's share of an update
grows with the model's weights and with the minibatches per frame.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlmem.agents.ppo.presets import PRESETS, Preset, agent_values

REPO = Path(__file__).resolve().parents[1]

SHAPES = {f"{preset.name} preset": {**agent_values(preset), "num_envs": PRESETS[preset].num_envs}
          for preset in (Preset.fast, Preset.minigrid, Preset.generic)}
"""Each preset's work and learning values, by name; the memory is the preset's size."""

ROWS = [*((shape, env, memory) for shape in ("fast preset", "minigrid preset")
          for env in ("DoorKey-5x5", "MemoryS7") for memory in ("lstm", "relstm")),
        *(("generic preset", "RepeatPreviousEasy", memory) for memory in ("lstm", "gtrxl"))]
"""(shape, env, cell) of each row: the MiniGrid presets on MiniGrid, the generic one (memories
of 256 units, one for the actor and one for the critic) on POPGym."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=4, help="timed updates of each")
    args = parser.parse_args()
    if str(REPO) not in sys.path:  # run as python benchmarks/fused_adam.py
        sys.path.insert(0, str(REPO))
    from experiments.fast_trainer.speed import print_variants_table

    print_variants_table(
        ((name, SHAPES[name], env, memory, PRESETS[Preset[name.split()[0]]].memory_size)
         for name, env, memory in ROWS),
        {"foreach": {"fused_adam": False}, "fused": {"fused_adam": True}}, args.updates)


if __name__ == "__main__":
    main()

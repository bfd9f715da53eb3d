"""Where one PPO update of our lstm agent spends its time on the CPU: cProfile of two rollouts
and of two PPO updates (MiniGrid DoorKey-5x5, library defaults, 16 envs, one torch thread).

    OMP_NUM_THREADS=1 python benchmarks/profile_update.py [--memory lstm] [--rows 22]

Prints the wall time of one rollout and one update, then the functions that take the most
time of their own in each (``pstats``, sorted by ``tottime``; cProfile slows Python-heavy code,
such as MiniGrid's observation grid, more than torch's kernels, so read the order, not the
seconds).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import torch
from cuda_check import ppo_trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", default="lstm")
    parser.add_argument("--rows", type=int, default=22, help="functions shown per profile")
    args = parser.parse_args()
    torch.set_num_threads(1)
    trainer = ppo_trainer(args.memory, 16, torch.device("cpu"))
    try:
        trainer.step()  # warm-up (and the first-use C++ build)
        start = time.perf_counter()
        rollout = trainer.collect()
        collected = time.perf_counter()
        trainer.update(rollout)
        print(f"one rollout {collected - start:.3f} s, one update "
              f"{time.perf_counter() - collected:.3f} s")
        for name, work in (("rollouts", trainer.collect), ("updates",
                                                           lambda: trainer.update(rollout))):
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(2):
                work()
            profiler.disable()
            print(f"\n## two {name}")
            pstats.Stats(profiler).sort_stats("tottime").print_stats(args.rows)
    finally:
        trainer.close()


if __name__ == "__main__":
    main()

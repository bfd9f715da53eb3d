"""Where one PPO update of our lstm agent spends its time on the CPU: cProfile of two rollouts
and of two PPO updates (MiniGrid DoorKey-5x5, library defaults, 16 envs, one torch thread).

    OMP_NUM_THREADS=1 python benchmarks/profile_update.py [--memory lstm] [--rows 22]
    OMP_NUM_THREADS=1 python benchmarks/profile_update.py --memory memlstm --rounds 3 --rows 0

Prints the wall time of one rollout and one update (with ``--rounds``, the best of that many
after a second warm-up), then the functions that take the most time of their own in each
(``pstats``, sorted by ``tottime``; cProfile slows Python-heavy code, such as MiniGrid's
observation grid, more than torch's kernels, so read the order, not the seconds; ``--rows 0``
skips the profiles).
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
    parser.add_argument("--rows", type=int, default=22,
                        help="functions shown per profile (0: no profiles)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="timed rollouts and updates; the best is printed")
    args = parser.parse_args()
    torch.set_num_threads(1)
    trainer = ppo_trainer(args.memory, 16, torch.device("cpu"))
    try:
        trainer.step()  # warm-up (and the first-use C++ build)
        if args.rounds > 1:
            trainer.step()
        rollout_s, update_s = [], []
        for _ in range(args.rounds):
            start = time.perf_counter()
            rollout = trainer.collect()
            collected = time.perf_counter()
            trainer.update(rollout)
            rollout_s.append(collected - start)
            update_s.append(time.perf_counter() - collected)
        print(f"one rollout {min(rollout_s):.3f} s, one update {min(update_s):.3f} s"
              + (f" (best of {args.rounds})" if args.rounds > 1 else ""))
        if args.rows <= 0:
            return
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

"""Where one PPO update of our lstm agent spends its time on the CPU: cProfile of two rollouts
and of two PPO updates (MiniGrid DoorKey-5x5, one torch thread), or torch's operators.

    OMP_NUM_THREADS=1 python benchmarks/profile_update.py [--memory lstm] [--rows 22]
    OMP_NUM_THREADS=1 python benchmarks/profile_update.py --memory memlstm --rounds 3 --rows 0
    OMP_NUM_THREADS=1 python benchmarks/profile_update.py --preset fast --rounds 4 --ops 20

``--preset minigrid`` (the default) is the library's defaults before the presets decided the
run's kernels: 16 gymnasium envs stepped in the process, Adam's ``foreach`` kernels.
``--preset fast`` is issue 59's fast preset as ``rlmem.train`` decides it, on the tensor envs
(``benchmarks/throughput.py``'s trainer: fused Adam, the update's threads decided).

Prints the wall time of one rollout and one update (with ``--rounds``, the best of that many
after a second warm-up), then the functions that take the most time of their own in each
(``pstats``, sorted by ``tottime``; cProfile slows Python-heavy code, such as MiniGrid's
observation grid, more than torch's kernels, so read the order, not the seconds; ``--rows 0``
skips the profiles). ``--ops N`` prints instead the N torch operators that take the most time
of their own in one rollout and in one update (``torch.profiler``), which is where the time of
the tensor envs' rollouts and of every update goes; ``--shapes`` splits each operator by the
shapes of its inputs (which convolution, which matrix product), at some cost in overhead.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable

import torch
from cuda_check import ENV, Trainer, ppo_trainer
from throughput import DEFAULT_BACKENDS, decided_config, ours
from torch.profiler import ProfilerActivity, profile

from rlmem.agents.ppo.presets import PRESETS, Preset
from rlmem.runs.allocator import keep_freed_memory


def trainer_of(preset: Preset, memory: str) -> Trainer:
    """``preset``'s trainer on :data:`ENV` (see the docstring)."""
    if preset is Preset.minigrid:
        return ppo_trainer(memory, PRESETS[preset].num_envs, torch.device("cpu"))
    return ours(ENV, PRESETS[preset].num_envs, memory, decided_config(ENV, preset, memory),
                DEFAULT_BACKENDS[preset])


def operator_table(work: Callable[[], object], rows: int, shapes: bool = False) -> str:
    """The ``rows`` torch operators that take the most time of their own in one ``work()``;
    with ``shapes``, each operator once per shape of its inputs (which of the convolutions)."""
    with profile(activities=[ProfilerActivity.CPU], record_shapes=shapes) as profiled:
        work()
    table = profiled.key_averages(group_by_input_shape=shapes).table(
        sort_by="self_cpu_time_total", row_limit=rows)
    return str(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memory", default="lstm")
    parser.add_argument("--rows", type=int, default=22,
                        help="functions shown per profile (0: no profiles)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="timed rollouts and updates; the best is printed")
    parser.add_argument("--preset", type=Preset, default=Preset.minigrid,
                        choices=[Preset.minigrid, Preset.fast], help="see the docstring")
    parser.add_argument("--ops", type=int, default=0,
                        help="torch operators shown per table, in place of the cProfile rows")
    parser.add_argument("--shapes", action="store_true",
                        help="with --ops: a row per operator and shape of its inputs")
    args = parser.parse_args()
    torch.set_num_threads(1)
    keep_freed_memory()  # as rlmem.train does: no page faults a run would not pay
    trainer = trainer_of(args.preset, args.memory)
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
              + (f" (best of {args.rounds})" if args.rounds > 1 else "")
              + f"; {trainer.frames} frames an update, {args.preset.value} preset")
        if args.ops > 0:
            for name, work in (("rollout", trainer.collect),
                               ("update", lambda: trainer.update(rollout))):
                print(f"\n## one {name}\n{operator_table(work, args.ops, args.shapes)}")
            return
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

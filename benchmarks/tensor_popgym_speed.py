"""Env-only frames per second of the tensor POPGym envs against POPGym's own, on one core.

    OMP_NUM_THREADS=1 python benchmarks/tensor_popgym_speed.py \
        [--envs RepeatPreviousEasy ...] [--sizes 16 256 4096] [--rounds 3] [--seconds 1]
        [--device cpu]

POPGym's own is what rlmem's gymnasium backend steps: ``num_envs`` POPGym envs in gymnasium's
``SyncVectorEnv`` (``make_vector_env``, auto-reset in the same step). The tensor env is
:data:`rlmem.envs.tensor.popgym.POPGYM_TENSOR_ENVS`'s. Both step random actions, sampled before
the clock starts (a pool of :data:`ACTION_POOL` batches, cycled), and nothing else: no agent.
Each measurement steps for at least ``--seconds``; the two backends alternate, round by round,
so that load from other processes hits both alike, and the load average is printed with each
round. torch computes on one thread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from rlmem.envs import make_vector_env
from rlmem.envs.tensor.popgym import POPGYM_TENSOR_ENVS

ACTION_POOL = 64
"""Batches of random actions sampled ahead, cycled through while timing."""
SIZES = (16, 256, 4096)


@dataclass(frozen=True)
class Measurement:
    """One timing: ``frames`` env steps (all envs counted) in ``seconds``."""

    env: str
    backend: str
    num_envs: int
    frames: int
    seconds: float

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds


def timed(step: Callable[[int], object], num_envs: int, seconds: float,
          synchronize: Callable[[], None]) -> tuple[int, float]:
    """Call ``step(i)`` for ``i = 0, 1, ...`` until ``seconds`` have passed (at least once);
    return the frames stepped and the time taken."""
    calls, start = 0, time.perf_counter()
    while True:
        step(calls)
        calls += 1
        if calls % 4 == 0 or calls == 1:
            synchronize()
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                return calls * num_envs, elapsed


def popgym_speed(name: str, num_envs: int, seconds: float) -> Measurement:
    """POPGym's own envs in rlmem's gymnasium vector env."""
    envs = make_vector_env(name, num_envs)
    try:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        actions = [envs.action_space.sample() for _ in range(ACTION_POOL)]
        frames, elapsed = timed(lambda i: envs.step(actions[i % ACTION_POOL]), num_envs,
                                seconds, lambda: None)
    finally:
        envs.close()
    return Measurement(name, "popgym", num_envs, frames, elapsed)


def tensor_speed(name: str, num_envs: int, seconds: float, device: str) -> Measurement:
    """The tensor env on ``device``."""
    env = POPGYM_TENSOR_ENVS[name](num_envs, device=device)
    env.reset(seed=0)
    env.action_space.seed(0)
    pool = torch.as_tensor(np.stack([env.action_space.sample() for _ in range(ACTION_POOL)]),
                           device=device)

    def synchronize() -> None:
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()

    frames, elapsed = timed(lambda i: env.step(pool[i % ACTION_POOL]), num_envs, seconds,
                            synchronize)
    return Measurement(name, f"tensor-{device}", num_envs, frames, elapsed)


def run(envs: Sequence[str], sizes: Sequence[int], rounds: int, seconds: float,
        device: str) -> list[Measurement]:
    """Every env at every size, POPGym's then the tensor env's, ``rounds`` times over;
    printed as they come."""
    measurements = []
    for round_index in range(rounds):
        print(f"round {round_index + 1}/{rounds}, load average {os.getloadavg()}", flush=True)
        for name in envs:
            for num_envs in sizes:
                for measurement in (popgym_speed(name, num_envs, seconds),
                                    tensor_speed(name, num_envs, seconds, device)):
                    measurements.append(measurement)
                    print(f"  {name:28s} {num_envs:6d} envs  {measurement.backend:12s} "
                          f"{measurement.frames_per_second:14,.0f} frames/s", flush=True)
    return measurements


def summary(measurements: Sequence[Measurement]) -> list[str]:
    """Per env and size: the median frames/s of each backend over the rounds, and their
    ratio."""
    lines = []
    keys = dict.fromkeys((m.env, m.num_envs) for m in measurements)
    for env, num_envs in keys:
        medians = {}
        for backend in dict.fromkeys(m.backend for m in measurements):
            speeds = [m.frames_per_second for m in measurements
                      if (m.env, m.num_envs, m.backend) == (env, num_envs, backend)]
            medians[backend] = statistics.median(speeds)
        popgym = medians.pop("popgym")
        lines.append(f"{env:28s} {num_envs:6d} envs  popgym {popgym:12,.0f}  "
                     + "  ".join(f"{name} {speed:14,.0f} ({speed / popgym:,.1f}x)"
                                 for name, speed in medians.items()))
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", default=sorted(POPGYM_TENSOR_ENVS),
                        choices=sorted(POPGYM_TENSOR_ENVS), metavar="ENV")
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread, device {args.device}, "
          f"{os.cpu_count()} cores")
    measurements = run(args.envs, args.sizes, args.rounds, args.seconds, args.device)
    print("\nmedians over the rounds:")
    print("\n".join(summary(measurements)))


if __name__ == "__main__":
    main()

"""What MiniGrid's observation costs, and what the direct view (rlmem.envs.minigrid_view) saves.

    OMP_NUM_THREADS=1 python benchmarks/minigrid_view.py [--envs DoorKey-5x5 MemoryS7]

For each env, in one process: the microseconds of MiniGrid's own ``gen_obs``, of
:func:`~rlmem.envs.minigrid_view.egocentric_image`, and of a whole ``env.step`` with each of
them (random actions, resetting where an episode ends), timed in turn in blocks of
:data:`BLOCK` calls so that load from other processes hits all four alike; the load average is
printed beside them.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
from minigrid.minigrid_env import MiniGridEnv

from rlmem.envs import env_spec
from rlmem.envs.minigrid_view import egocentric_image, use_direct_view

BLOCK = 100
"""Calls timed at a time, in turn with the other measurements."""


def random_steps(env: gym.Env) -> Callable[[], object]:
    """One ``env.step`` with a random action per call, resetting where an episode ends."""
    rng = np.random.default_rng(0)
    env.reset(seed=0)

    def step() -> None:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(0, 7)))
        if terminated or truncated:
            env.reset()

    return step


def microseconds(works: list[Callable[[], object]], calls: int) -> list[float]:
    """The mean time of one call of each of ``works``, timed in turn, :data:`BLOCK` calls at a
    time, ``calls`` calls each."""
    totals = [0.0] * len(works)
    for _ in range(max(1, calls // BLOCK)):
        for index, work in enumerate(works):
            start = time.perf_counter()
            for _ in range(BLOCK):
                work()
            totals[index] += time.perf_counter() - start
    return [total / (max(1, calls // BLOCK) * BLOCK) * 1e6 for total in totals]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["DoorKey-5x5", "MemoryS7", "DoorKey-16x16"])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print("| env | MiniGrid gen_obs µs | direct view µs | step µs, MiniGrid's | step µs, direct "
          "| gen_obs share of MiniGrid's step |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.envs:
        minigrid_env, direct_env = (gym.make(env_spec(name).id) for _ in range(2))
        use_direct_view(direct_env.unwrapped)  # type: ignore[arg-type]  # a MiniGrid env
        world = minigrid_env.unwrapped
        assert isinstance(world, MiniGridEnv)
        own, direct, step_own, step_direct = microseconds(
            [functools.partial(MiniGridEnv.gen_obs, world),
             functools.partial(egocentric_image, world),
             random_steps(minigrid_env), random_steps(direct_env)], args.steps)
        print(f"| {name} | {own:.0f} | {direct:.0f} | {step_own:.0f} | {step_direct:.0f} "
              f"| {own / step_own:.0%} |")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

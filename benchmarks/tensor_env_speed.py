"""Env-only frames per second of the tensor envs against the originals (issue 54).

    OMP_NUM_THREADS=1 python benchmarks/tensor_env_speed.py [--envs DoorKey-5x5 MemoryS7]
        [--num-envs 16 256 4096] [--device cpu|cuda] [--rounds 3] [--block-seconds 1]

For each env and number of envs, three backends step random actions (resetting where episodes
end, as a trainer's vector env does):

- ``minigrid``: MiniGrid's own envs (their own ``gen_obs``) in gymnasium's ``SyncVectorEnv``,
  with rlmem's observation encoding;
- ``direct``: rlmem's gymnasium path as it is (``make_vector_env(backend="gymnasium")``, the
  direct view of :mod:`rlmem.envs.minigrid_view`);
- ``tensor``: ``make_vector_env(backend="tensor", device=...)``.

They are timed in turn, ``--rounds`` times, each for at least ``--block-seconds`` per turn, so
that load from other processes hits all alike; the load average (``os.getloadavg``) is printed
at every round. On the CPU torch runs on one thread (``torch.set_num_threads(1)``): one core
for every backend. With ``--device cuda`` only the tensor envs move (the originals have no GPU
path); references above ``--max-reference-envs`` envs are skipped (building tens of thousands
of Python envs measures nothing new).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from rlmem.envs import MiniGridObservation, env_spec, make_vector_env
from rlmem.envs.tensor.registry import TENSOR_ENVS

BACKENDS = ("minigrid", "direct", "tensor")
"""The backends, in the order they are timed and printed."""


def minigrid_own(name: str, num_envs: int) -> VectorEnv:
    """MiniGrid's own envs (no direct view) with rlmem's encoding, in a SyncVectorEnv."""
    def make() -> gym.Env:
        return MiniGridObservation(gym.make(env_spec(name).id), mission=False)
    return SyncVectorEnv([make] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)


def make_backend(backend: str, name: str, num_envs: int, device: str) -> VectorEnv:
    """``num_envs`` copies of env ``name`` on ``backend``."""
    if backend == "minigrid":
        return minigrid_own(name, num_envs)
    return make_vector_env(name, num_envs, backend="tensor" if backend == "tensor"
                           else "gymnasium", device=device if backend == "tensor" else "cpu")


@dataclass
class Stepper:
    """Steps one vector env with random actions and counts its frames and seconds."""

    envs: VectorEnv
    device: torch.device | None
    frames: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        self.envs.reset(seed=0)
        self.rng = np.random.default_rng(0)
        self.actions = int(self.envs.single_action_space.n)  # type: ignore[attr-defined]

    def run(self, block_seconds: float) -> None:
        """Step for at least ``block_seconds``, adding to the counts."""
        num_envs, step = self.envs.num_envs, self._step_function()
        start = time.perf_counter()
        while time.perf_counter() - start < block_seconds:
            for _ in range(8):
                step()
            self.frames += 8 * num_envs
            if self.device is not None and self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        self.seconds += time.perf_counter() - start

    def _step_function(self) -> Callable[[], object]:
        if self.device is None:
            return lambda: self.envs.step(self.rng.integers(0, self.actions, self.envs.num_envs))
        device, num_envs = self.device, self.envs.num_envs
        return lambda: self.envs.step(torch.randint(0, self.actions, (num_envs,), device=device))

    @property
    def frames_per_second(self) -> float:
        return self.frames / self.seconds if self.seconds else float("nan")


def measure(name: str, num_envs: int, args: argparse.Namespace) -> dict[str, float]:
    """Frames/s of each backend for ``num_envs`` copies of ``name``, timed in turn."""
    steppers = {backend: Stepper(make_backend(backend, name, num_envs, args.device),
                                 torch.device(args.device) if backend == "tensor" else None)
                for backend in BACKENDS
                if backend == "tensor" or num_envs <= args.max_reference_envs}
    for round_ in range(args.rounds):
        for stepper in steppers.values():
            stepper.run(args.block_seconds)
        print(f"  {name}, {num_envs} envs, round {round_ + 1}: load average "
              f"{os.getloadavg()[0]:.2f}", flush=True)
    for stepper in steppers.values():
        stepper.envs.close()
    return {backend: steppers[backend].frames_per_second if backend in steppers
            else float("nan") for backend in BACKENDS}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=["DoorKey-5x5", "MemoryS7"],
                        choices=list(TENSOR_ENVS))
    parser.add_argument("--num-envs", nargs="+", type=int, default=[16, 256, 4096])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--block-seconds", type=float, default=1.0)
    parser.add_argument("--max-reference-envs", type=int, default=4096)
    args = parser.parse_args(argv)
    if args.device == "cpu":
        torch.set_num_threads(1)
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "1 CPU thread"
    print(f"tensor envs on {args.device} ({where}); load average {os.getloadavg()}")
    rows = []
    for name in args.envs:
        for num_envs in args.num_envs:
            rows.append((name, num_envs, measure(name, num_envs, args)))
    print("| env | envs | MiniGrid's own frames/s | direct view frames/s | tensor frames/s "
          "| tensor / own | tensor / direct |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, num_envs, fps in rows:
        print(f"| {name} | {num_envs} | {fps['minigrid']:,.0f} | {fps['direct']:,.0f} "
              f"| {fps['tensor']:,.0f} | {fps['tensor'] / fps['minigrid']:.1f}x "
              f"| {fps['tensor'] / fps['direct']:.1f}x |")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()

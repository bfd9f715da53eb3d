"""Our PPO's frames/s against the envs' own limit, by cores, envs and cell; and the supervised
trainer's iterations/s by torch threads. Writes a markdown table to ``benchmarks/results/``.

    OMP_NUM_THREADS=1 python benchmarks/scaling.py                       # every cell, 16/32/64
    OMP_NUM_THREADS=1 python benchmarks/scaling.py --cells lstm relstm --num-envs 16 --updates 3

Rows (MiniGrid DoorKey-5x5, library defaults, ``frames_per_env = 128``):

- ``env only``: random actions, no model. ``1 core``: a :class:`gymnasium.vector.SyncVectorEnv`
  in this process (the limit ``vectorization=sync`` can reach); ``k cores``:
  :class:`rlmem.envs.EnvWorkers` with ``k - 1`` workers and the same two groups as a PPO run.
- ``ppo <cell>``: whole updates (rollout and PPO update). ``1 core`` is ``vectorization=sync``;
  ``k cores`` is ``vectorization=async`` with ``k - 1`` env workers beside this process. Each
  cell is also shown against the one-core env-only limit of the same number of envs.
- ``supervised <cell>``: ``python -m rlmem.supervised task=copy`` iterations/s at
  ``OMP_NUM_THREADS`` 1 and k (from its progress.csv, the first iterations excluded).

The columns of one row are measured alternately, one update (or one batch of env steps) each
in turn, so that load from other processes hits them alike; the load average is written beside
each row, and the machine (cores, CPU model) at the top.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from machine import cpu_model
from omegaconf import OmegaConf

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.async_collector import AsyncRolloutCollector
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.presets import Preset, agent_values
from rlmem.agents.ppo.update import PPO
from rlmem.cells import cell_config
from rlmem.envs import EnvWorkers, env_constructors, make_vector_env, usable_cores
from rlmem.envs.vectorization import ASYNC_GROUPS

ENV = "DoorKey-5x5"
CELLS = ("lstm", "gru", "relstm", "tarnn", "memlstm", "sarnn", "irnn", "ernn", "relrnn")
RESULTS = Path(__file__).resolve().parent / "results"

Timed = Callable[[], int]
"""One timed unit of work (an update, or a batch of env steps); returns its frames."""


def env_only(num_envs: int, workers: int, steps: int = 32) -> tuple[Timed, Callable[[], None]]:
    """``steps`` random steps of every env per call: in this process (``workers = 0``) or in
    ``workers`` processes, two groups in flight."""
    rng = np.random.default_rng(0)
    if workers == 0:
        envs = make_vector_env(ENV, num_envs)
        envs.reset(seed=0)

        def sync() -> int:
            for _ in range(steps):
                envs.step(rng.integers(0, 7, num_envs))
            return steps * num_envs

        return sync, envs.close
    pool = EnvWorkers(env_constructors(ENV, num_envs), ENV, workers=workers,
                      groups=ASYNC_GROUPS)
    pool.reset(seed=0)

    def overlapped() -> int:
        for group, part in enumerate(pool.groups):
            pool.step_async(group, rng.integers(0, 7, part.stop - part.start), "benchmark")
        for _ in range(steps - 1):
            for group, part in enumerate(pool.groups):
                pool.step_wait(group, "benchmark")
                pool.step_async(group, rng.integers(0, 7, part.stop - part.start), "benchmark")
        for group in range(len(pool.groups)):
            pool.step_wait(group, "benchmark")
        return steps * num_envs

    return overlapped, pool.close


def minigrid_config() -> PPOConfig:
    """The library's defaults as a MiniGrid run decides them (its preset's values)."""
    return PPOConfig(**agent_values(Preset.minigrid))


def ppo(memory: str, num_envs: int, workers: int,
        update_threads: int = 1) -> tuple[Timed, Callable[[], None]]:
    """One update of our PPO per call, ``vectorization=sync`` (``workers = 0``) or ``async``;
    the PPO update on ``update_threads`` torch threads (the rollout on one), which the library
    does not do: it measures whether the update, when the envs wait, would gain from them."""
    torch.manual_seed(0)
    config = OmegaConf.structured(minigrid_config())
    envs: EnvWorkers | None = None
    if workers == 0:
        vector = make_vector_env(ENV, num_envs)
        spaces = (vector.single_observation_space, vector.single_action_space)
        close: Callable[[], None] = vector.close
    else:
        envs = EnvWorkers(env_constructors(ENV, num_envs), ENV, workers=workers,
                          groups=ASYNC_GROUPS)
        spaces = (envs.single_observation_space, envs.single_action_space)
        close = envs.close
    model = ActorCritic(*spaces, OmegaConf.structured(cell_config(memory)))
    trainer = PPO(model, config)
    collector = (RolloutCollector(vector, model, torch.device("cpu"), seed=0) if envs is None
                 else AsyncRolloutCollector(envs, model, torch.device("cpu"), seed=0))

    def update() -> int:
        rollout = collector.collect(config.frames_per_env, config.recurrence)
        torch.set_num_threads(update_threads)
        try:
            trainer.update(rollout)
        finally:
            torch.set_num_threads(1)
        return num_envs * config.frames_per_env

    return update, close


def alternate(columns: dict[str, tuple[Timed, Callable[[], None]]],
              rounds: int) -> tuple[dict[str, float], float]:
    """Frames/s of each column, timed in turn over ``rounds`` rounds after one warm-up; and
    the load average over the row."""
    frames = dict.fromkeys(columns, 0)
    seconds = dict.fromkeys(columns, 0.0)
    try:
        for timed, _ in columns.values():
            timed()
        loads = [os.getloadavg()[0]]
        for _ in range(rounds):
            for name, (timed, _) in columns.items():
                start = time.perf_counter()
                frames[name] += timed()
                seconds[name] += time.perf_counter() - start
        loads.append(os.getloadavg()[0])
    finally:
        for _, close in columns.values():
            close()
    return {name: frames[name] / seconds[name] for name in columns}, max(loads)


def supervised_rate(memory: str, threads: int, iterations: int) -> float:
    """Iterations/s of ``python -m rlmem.supervised task=copy`` on the CPU (from its
    progress.csv, from the third logged iteration on); ``device=cpu`` because on a machine with
    a GPU ``auto`` would measure the GPU, not the threads."""
    with tempfile.TemporaryDirectory() as folder:
        run = Path(folder) / "run"
        subprocess.run(
            [sys.executable, "-m", "rlmem.supervised", "task=copy", f"memory={memory}",
             f"iterations={iterations}", "eval_every=100000", "log_every=1", "figures=false",
             "progress_bar=false", "device=cpu", f"run_dir={run}"],
            check=True, capture_output=True, cwd=folder,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        with (run / "progress.csv").open(newline="") as file:
            rows = [row for row in csv.DictReader(file) if row.get("time/elapsed_s")]
    first, last = rows[2], rows[-1]
    return ((float(last["iteration"]) - float(first["iteration"]))
            / (float(last["time/elapsed_s"]) - float(first["time/elapsed_s"])))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", nargs="+", default=list(CELLS))
    parser.add_argument("--num-envs", nargs="+", type=int, default=[16, 32, 64])
    parser.add_argument("--cores", nargs="+", type=int, default=None,
                        help="core counts to measure (default: 1, 2 and all usable)")
    parser.add_argument("--updates", type=int, default=2, help="timed updates per column")
    parser.add_argument("--update-threads", nargs="+", type=int, default=[1],
                        help="torch threads of the PPO update; a row per value beyond 1")
    parser.add_argument("--supervised-cells", nargs="*", default=["lstm", "relstm"])
    parser.add_argument("--supervised-iterations", type=int, default=12)
    parser.add_argument("--output", type=Path, default=RESULTS / "scaling.md")
    args = parser.parse_args()
    torch.set_num_threads(1)
    cores = usable_cores()
    counts = args.cores or sorted({1, min(2, cores), cores})
    lines = [f"# Scaling of our PPO ({ENV}, library defaults)", "",
             f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; {cores} usable cores, "
             f"{cpu_model()}; torch {torch.__version__}, {torch.get_num_threads()} thread in "
             "the trainer's process. Frames/s; `k cores` = the trainer plus k - 1 env workers "
             "(`vectorization=async`), `1 core` = `vectorization=sync`. The columns of a row "
             "were timed alternately; `load` is the highest 1-minute load average seen over "
             "the row.", "",
             "| row | envs | " + " | ".join(f"{k} core{'s' * (k > 1)}" for k in counts)
             + " | × 1-core env limit | load |",
             "|---|---|" + "---|" * len(counts) + "---|---|"]

    def emit(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    for line in lines:
        print(line)
    for num_envs in args.num_envs:
        limit, load = alternate({f"{k}": env_only(num_envs, k - 1) for k in counts},
                                rounds=max(3, args.updates))
        emit(f"| env only | {num_envs} | " + " | ".join(f"{limit[f'{k}']:.0f}" for k in counts)
             + f" | 1.00 | {load:.1f} |")
        for memory, threads in itertools.product(args.cells, args.update_threads):
            fps, load = alternate({f"{k}": ppo(memory, num_envs, k - 1, threads)
                                   for k in counts}, rounds=args.updates)
            best = max(fps.values())
            label = f"ppo {memory}" + (f", update on {threads} threads" if threads > 1 else "")
            emit(f"| {label} | {num_envs} | "
                 + " | ".join(f"{fps[f'{k}']:.0f}" for k in counts)
                 + f" | {best / limit['1']:.2f} | {load:.1f} |")
    threads = sorted({1, cores})
    if args.supervised_cells:
        emit("")
        emit("| supervised (copy, iterations/s) | " + " | ".join(
            f"{t} thread{'s' * (t > 1)}" for t in threads) + " | load |")
        emit("|---|" + "---|" * len(threads) + "---|")
        for memory in args.supervised_cells:
            rates = {t: supervised_rate(memory, t, args.supervised_iterations) for t in threads}
            emit(f"| {memory} | " + " | ".join(f"{rates[t]:.2f}" for t in threads)
                 + f" | {os.getloadavg()[0]:.1f} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

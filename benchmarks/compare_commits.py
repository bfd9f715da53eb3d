"""Our PPO's update time at two or more versions of rlmem, alternating, in one run.

    python benchmarks/compare_commits.py /tmp/base_pkg main main:async main:envonly

Each argument is a folder from which ``import rlmem`` loads that version (a checkout arranged
as a package: ``rlmem/`` with ``agents/`` and ``envs/`` copied inside, see
:func:`package_checkout`; or ``main`` for the installed rlmem), optionally with a mode after a
colon: ``sync`` (the default), ``async`` (``vectorization=async``, where the version has it),
``fast`` (``agent.preset=fast`` on the tensor envs, every key decided as ``rlmem.train``
decides it, the typed config a run trains with: ``throughput.py``'s trainer over that
version; ``--num-envs`` is then the preset's), ``default`` (the same with the minigrid preset:
what ``rlmem.train env=DoorKey-5x5`` runs, 16 tensor envs) or
``envonly`` (the envs alone with random actions, 128 steps per request: the limit). Each
version runs in a worker process of its own that times one full update (rollout, then PPO
update) per request, with the rollout and the update timed apart; the parent asks the workers
in turn, so load from other processes on a shared machine hits all of them alike. Reports
frames/s and ratios against the first version, with the load average, and the frames per
second of the trainer's process's CPU time (``time.process_time``), which on a loaded machine
leaves out the time spent waiting for a core (for ``async``: the trainer's share only). A
worker keeps freed memory (:func:`rlmem.runs.allocator.keep_freed_memory`) where its version
has it, as that version's ``rlmem.train`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r'''
import json, sys, time, torch
from omegaconf import OmegaConf
torch.set_num_threads(1)
memory, num_envs, grid, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
try:  # freed memory kept, as that version's run programs keep it (since session 78)
    from rlmem.runs.allocator import keep_freed_memory
    keep_freed_memory()
except ImportError:
    pass
def serve(collect, update, frames):  # one timed update (rollout, then PPO update) a request
    for line in sys.stdin:
        start, cpu_start = time.perf_counter(), time.process_time()
        rollout = collect()
        middle, cpu_middle = time.perf_counter(), time.process_time()
        update(rollout)
        end, cpu_end = time.perf_counter(), time.process_time()
        print(json.dumps([middle - start, end - middle, cpu_middle - cpu_start,
                          cpu_end - cpu_middle, frames]), flush=True)
if mode == "envonly":  # random actions, no model: the envs' own limit on one core
    import numpy as np
    from rlmem.envs import make_vector_env
    envs = make_vector_env("DoorKey-5x5", num_envs)
    envs.reset(seed=0)
    rng = np.random.default_rng(0)
    for line in sys.stdin:
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(128):
            envs.step(rng.integers(0, 7, num_envs))
        print(json.dumps([time.perf_counter() - start, 0.0, time.process_time() - cpu, 0.0,
                          num_envs * 128]), flush=True)
    sys.exit()
if mode in ("fast", "default"):  # as `rlmem.train env=DoorKey-5x5 env_backend=tensor`, with
    # agent.preset=fast or the minigrid preset
    sys.path.insert(0, sys.argv[5])  # throughput.py's trainer, over this version's rlmem
    from throughput import ours
    from rlmem.agents.ppo import PPOConfig
    from rlmem.agents.ppo.presets import PRESETS, Preset
    preset = Preset.fast if mode == "fast" else Preset.minigrid
    # decided here, with the memory, as that version's rlmem.train decides: its throughput.py
    # left the memory out before 2026-12-01, and so ran lstm without agent.compiled_lstm
    config = PPOConfig(**PPOConfig.decided({"preset": preset.value}, {
        "env": "DoorKey-5x5", "memory": {"name": memory}}))
    trainer = ours("DoorKey-5x5", PRESETS[preset].num_envs, memory, config, "tensor")
    serve(trainer.collect, trainer.update, trainer.frames)
    sys.exit()
try:
    from rlmem.agents.ppo.collector import RolloutCollector
    from rlmem.agents.ppo.update import PPO
    from rlmem.agents.ppo import PPOConfig
    from rlmem.agents.ppo.model import ActorCritic
    old = False
except ImportError:  # the layout of the first release
    from rlmem.agents.rollout import RolloutCollector
    from rlmem.agents.ppo import PPO, PPOConfig
    from rlmem.agents.model import ActorCritic
    old = True
from rlmem.cells import cell_config
from rlmem.envs import make_vector_env
torch.manual_seed(0)
if mode == "async":
    from rlmem.agents.ppo.async_collector import AsyncRolloutCollector as RolloutCollector
    from rlmem.envs import EnvWorkers, env_constructors, worker_count
    envs = EnvWorkers(env_constructors("DoorKey-5x5", num_envs), "DoorKey-5x5",
                      workers=worker_count(num_envs))
else:
    envs = make_vector_env("DoorKey-5x5", num_envs)
try:  # MiniGrid's preset, where the version has presets
    from rlmem.agents.ppo.presets import Preset, agent_values
    config = OmegaConf.structured(PPOConfig(**agent_values(Preset.minigrid)))
except ImportError:
    try:  # presets without agent_values (before the presets sized the memory)
        import dataclasses
        from rlmem.agents.ppo.presets import PRESETS, Preset
        config = OmegaConf.structured(PPOConfig(**dataclasses.asdict(PRESETS[Preset.minigrid])))
    except ImportError:
        config = OmegaConf.structured(PPOConfig())
action = int(envs.single_action_space.n) if old else envs.single_action_space
options = {} if grid == "default" else {"grid_encoding": grid}
model = ActorCritic(envs.single_observation_space, action,
                    OmegaConf.structured(cell_config(memory)), **options)
ppo = PPO(model, config)
collector = RolloutCollector(envs, model, torch.device("cpu"), seed=0)
serve(lambda: collector.collect(config.frames_per_env, config.recurrence),
      (lambda rollout: ppo.update(rollout, progress=0.0)) if old else ppo.update,
      num_envs * config.frames_per_env)
envs.close()
'''


def package_checkout(checkout: Path, into: Path) -> Path:
    """``checkout``'s rlmem as an importable folder: ``rlmem/`` with ``agents/`` and ``envs/``
    copied in as the package-dir mapping of pyproject.toml places them."""
    shutil.copytree(checkout / "rlmem", into / "rlmem")
    shutil.copytree(checkout / "agents", into / "rlmem" / "agents")
    shutil.copytree(checkout / "envs", into / "rlmem" / "envs")
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("versions", nargs="+",
                        help="folders to import rlmem from ('main': the installed one)")
    parser.add_argument("--memory", default="lstm")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--updates", type=int, default=8)
    parser.add_argument("--grid-encoding", nargs="+", default=["default"],
                        help="per version (one value: for all): 'default' (the version's own) "
                             "or raw/onehot/embedding, for versions that have the choice")
    args = parser.parse_args()
    grids = args.grid_encoding * len(args.versions) if len(args.grid_encoding) == 1 \
        else args.grid_encoding
    workers = []
    for version, grid in zip(args.versions, grids, strict=True):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        folder, _, mode = version.partition(":")
        if folder != "main":
            env["PYTHONPATH"] = folder
        workers.append(subprocess.Popen(
            [sys.executable, "-c", WORKER, args.memory, str(args.num_envs), grid,
             mode or "sync", str(Path(__file__).resolve().parent)], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            cwd=tempfile.gettempdir()))
    totals = [[0.0, 0.0, 0.0, 0.0, 0.0] for _ in workers]  # the four times, then frames
    for index in range(args.updates + 1):  # the first update warms up
        for worker, total in zip(workers, totals, strict=True):
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
            times = json.loads(worker.stdout.readline())
            if index:
                for column, value in enumerate(times):
                    total[column] += value
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    print(f"{args.memory}, {args.updates} alternating updates each; load average "
          f"{os.getloadavg()[0]:.2f}")
    first = totals[0][4] / (totals[0][0] + totals[0][1])
    for version, grid, (collect, update, cpu_collect, cpu_update, frames) in zip(
            args.versions, grids, totals, strict=True):
        fps = frames / (collect + update)
        print(f"  {version:<30} grid {grid:<9} {fps:7.0f} frames/s ({fps / first:.2f}x the "
              f"first); rollout {collect / args.updates:.3f} s, update "
              f"{update / args.updates:.3f} s; the trainer's process's CPU time: "
              f"{frames / (cpu_collect + cpu_update):.0f} frames/CPU-s (rollout "
              f"{cpu_collect / args.updates:.3f} s, update {cpu_update / args.updates:.3f} s)")


if __name__ == "__main__":
    main()

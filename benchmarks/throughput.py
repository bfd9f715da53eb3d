"""Training throughput of our PPO against sb3-contrib's RecurrentPPO, measured in one run.

    OMP_NUM_THREADS=1 python benchmarks/throughput.py                   # DoorKey-5x5, lstm
    OMP_NUM_THREADS=1 python benchmarks/throughput.py --memory relstm --rounds 1

Both train on the same envs (MiniGrid DoorKey-5x5, 16 envs stepped in this process) with the
same rollout length (``n_steps = 128`` frames per env per update). Each measurement is the
wall-clock time of ``--updates`` full updates (rollout + optimisation) after one warm-up update.
Rounds alternate ours and sb3's, so that load from other processes on a shared machine hits
both alike.

sb3-contrib runs twice: with its defaults (``MlpLstmPolicy``: LSTM 256, 10 epochs, batch 128),
the configuration the issue's target refers to, and with our hyperparameters (LSTM 64, 4 epochs,
batch 256) for a like-for-like view.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch
from minigrid.wrappers import ImgObsWrapper
from omegaconf import OmegaConf

from rlmem.agents.model import ActorCritic
from rlmem.agents.ppo import PPO, PPOConfig
from rlmem.agents.rollout import RolloutCollector
from rlmem.cells import cell_config
from rlmem.envs import env_spec, make_vector_env

N_STEPS = 128


def ours(env: str, num_envs: int, memory: str, updates: int) -> float:
    """Frames per second of our PPO (collect + update), after one warm-up update."""
    torch.manual_seed(0)
    envs = make_vector_env(env, num_envs)
    config = OmegaConf.structured(PPOConfig(frames_per_env=N_STEPS))
    model = ActorCritic(envs.single_observation_space, int(envs.single_action_space.n),
                        OmegaConf.structured(cell_config(memory)))
    ppo = PPO(model, config)
    collector = RolloutCollector(envs, model, torch.device("cpu"), seed=0)

    def update() -> None:
        ppo.update(collector.collect(config.frames_per_env, config.recurrence), progress=0.0)

    update()
    start = time.perf_counter()
    for _ in range(updates):
        update()
    elapsed = time.perf_counter() - start
    envs.close()
    return updates * num_envs * N_STEPS / elapsed


def sb3(env: str, num_envs: int, updates: int, **kwargs: Any) -> float:
    """Frames per second of sb3-contrib's RecurrentPPO (MlpLstmPolicy), after one warm-up."""
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env

    env_id = env_spec(env).id
    vec = make_vec_env(lambda: ImgObsWrapper(gym.make(env_id)), n_envs=num_envs, seed=0)
    model = RecurrentPPO("MlpLstmPolicy", vec, n_steps=N_STEPS, seed=0, device="cpu",
                         verbose=0, **kwargs)
    frames = num_envs * N_STEPS
    model.learn(total_timesteps=frames)
    start = time.perf_counter()
    model.learn(total_timesteps=updates * frames, reset_num_timesteps=False)
    elapsed = time.perf_counter() - start
    vec.close()
    return updates * frames / elapsed


MATCHED = {"n_epochs": 4, "batch_size": 256, "learning_rate": 1e-3, "ent_coef": 0.01,
           "max_grad_norm": 0.5, "policy_kwargs": {"lstm_hidden_size": 64}}
"""sb3-contrib hyperparameters set to ours (rollout, epochs, batch, LSTM size)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="DoorKey-5x5")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--memory", default="lstm", help="our cell (sb3 always runs its LSTM)")
    parser.add_argument("--updates", type=int, default=5, help="timed updates per measurement")
    parser.add_argument("--rounds", type=int, default=2, help="alternating measurement rounds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for both")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    runs: dict[str, Callable[[], float]] = {
        f"ours ({args.memory})": lambda: ours(args.env, args.num_envs, args.memory, args.updates),
        "sb3-contrib defaults": lambda: sb3(args.env, args.num_envs, args.updates),
        "sb3-contrib matched": lambda: sb3(args.env, args.num_envs, args.updates, **MATCHED),
    }
    results: dict[str, list[float]] = {name: [] for name in runs}
    for round_index in range(args.rounds):
        for name, run in runs.items():
            results[name].append(run())
            print(f"round {round_index + 1}: {name}: {results[name][-1]:.0f} frames/s",
                  flush=True)
    medians = {name: statistics.median(values) for name, values in results.items()}
    ours_fps = medians[f"ours ({args.memory})"]
    print(f"\n{args.env}, {args.num_envs} envs, {N_STEPS} frames/env/update, "
          f"{args.updates} updates x {args.rounds} rounds (median frames/s):")
    for name, fps in medians.items():
        ratio = "" if name.startswith("ours") else f"   ours / this = {ours_fps / fps:.2f}x"
        print(f"  {name:<22} {fps:8.0f}{ratio}")


if __name__ == "__main__":
    main()

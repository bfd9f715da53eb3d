"""Training throughput of our PPO, per cell and against sb3-contrib's RecurrentPPO, in one run.

    OMP_NUM_THREADS=1 python benchmarks/throughput.py                   # DoorKey-5x5, lstm
    OMP_NUM_THREADS=1 python benchmarks/throughput.py --memories lstm relstm tarnn --no-sb3

Both train on the same envs (MiniGrid DoorKey-5x5, 16 envs stepped in this process, each
making its view with :func:`rlmem.envs.minigrid_view.use_direct_view` as ``rlmem.envs`` does;
``--sb3-minigrid-view`` gives sb3's envs MiniGrid's own, slower ``gen_obs``) with the
same rollout length (``n_steps = 128`` frames per env per update). After one warm-up update
each, the trainers take turns, one full update (rollout + optimisation) at a time, so that load
from other processes on a shared machine hits all of them alike; frames/s is the total frames
over the total time of each trainer's timed updates.

sb3-contrib's ``MlpLstmPolicy`` runs with our hyperparameters (LSTM 64, 4 epochs, batch 256,
lr 1e-3, ...), and with ``--sb3-defaults`` also with its own defaults (LSTM 256 for actor and
critic, 10 epochs, batch 128), which is much slower still.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch
from minigrid.wrappers import ImgObsWrapper
from omegaconf import OmegaConf

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.presets import Preset, agent_values
from rlmem.agents.ppo.update import PPO
from rlmem.cells import cell_config
from rlmem.envs import env_spec, make_vector_env
from rlmem.envs.minigrid_view import use_direct_view

N_STEPS = 128

MATCHED = {"n_epochs": 4, "batch_size": 256, "learning_rate": 1e-3, "ent_coef": 0.01,
           "max_grad_norm": 0.5, "policy_kwargs": {"lstm_hidden_size": 64}}
"""sb3-contrib hyperparameters set to ours (rollout, epochs, batch, LSTM size)."""


def ours(env: str, num_envs: int, memory: str) -> Callable[[], None]:
    """One update of our PPO (collect + update) per call."""
    torch.manual_seed(0)
    envs = make_vector_env(env, num_envs)
    config = OmegaConf.structured(PPOConfig(
        **{**agent_values(Preset.minigrid), "frames_per_env": N_STEPS}))
    model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                        OmegaConf.structured(cell_config(memory)))
    ppo = PPO(model, config)
    collector = RolloutCollector(envs, model, torch.device("cpu"), seed=0)

    def update() -> None:
        ppo.update(collector.collect(config.frames_per_env, config.recurrence))

    return update


def sb3(env: str, num_envs: int, direct_view: bool = True, **kwargs: Any
        ) -> Callable[[], None]:
    """One update of sb3-contrib's RecurrentPPO (MlpLstmPolicy) per call."""
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env

    env_id = env_spec(env).id

    def make() -> gym.Env[Any, Any]:
        made = gym.make(env_id)
        if direct_view:
            use_direct_view(made.unwrapped)  # type: ignore[arg-type]  # a MiniGrid env
        return ImgObsWrapper(made)

    vec = make_vec_env(make, n_envs=num_envs, seed=0)
    model = RecurrentPPO("MlpLstmPolicy", vec, n_steps=N_STEPS, seed=0, device="cpu",
                         verbose=0, **kwargs)
    first = [True]

    def update() -> None:
        model.learn(total_timesteps=num_envs * N_STEPS, reset_num_timesteps=first[0])
        first[0] = False

    return update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="DoorKey-5x5")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--memories", nargs="+", default=["lstm"],
                        help="our cells; ratios are against the first (sb3 runs its LSTM)")
    parser.add_argument("--no-sb3", action="store_true", help="time our PPO's cells only")
    parser.add_argument("--updates", type=int, default=10, help="timed updates per trainer")
    parser.add_argument("--sb3-defaults", action="store_true",
                        help="also time RecurrentPPO with its default hyperparameters")
    parser.add_argument("--sb3-minigrid-view", action="store_true",
                        help="sb3's envs make their view with MiniGrid's own gen_obs")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for all")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    trainers = {f"ours ({memory})": ours(args.env, args.num_envs, memory)
                for memory in args.memories}
    if not args.no_sb3:
        trainers["sb3-contrib, our hparams"] = sb3(args.env, args.num_envs,
                                                         not args.sb3_minigrid_view, **MATCHED)
    if args.sb3_defaults:
        trainers["sb3-contrib defaults"] = sb3(args.env, args.num_envs,
                                                     not args.sb3_minigrid_view)
    for update in trainers.values():
        update()  # warm-up
    load_before = os.getloadavg()[0]
    seconds = dict.fromkeys(trainers, 0.0)
    for index in range(args.updates):
        for name, update in trainers.items():
            start = time.perf_counter()
            update()
            seconds[name] += time.perf_counter() - start
        print(f"update {index + 1}/{args.updates}: " + ", ".join(
            f"{name} {(index + 1) * args.num_envs * N_STEPS / seconds[name]:.0f}"
            for name in trainers), flush=True)

    frames = args.updates * args.num_envs * N_STEPS
    fps = {name: frames / total for name, total in seconds.items()}
    first = f"ours ({args.memories[0]})"
    print(f"\n{args.env}, {args.num_envs} envs, {N_STEPS} frames/env/update, "
          f"{args.updates} alternating updates each (frames/s); load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after:")
    for name, value in fps.items():
        ratio = "" if name == first else (
            f"   this / {first} = {value / fps[first]:.2f}x" if name.startswith("ours")
            else f"   {first} / this = {fps[first] / value:.2f}x")
        print(f"  {name:<26} {value:8.0f}{ratio}")


if __name__ == "__main__":
    main()

"""Training throughput of our PPO, per cell and against sb3-contrib's RecurrentPPO, in one run.

    OMP_NUM_THREADS=1 python benchmarks/throughput.py                   # DoorKey-5x5, lstm
    OMP_NUM_THREADS=1 python benchmarks/throughput.py --memories lstm relstm tarnn --no-sb3
    OMP_NUM_THREADS=1 python benchmarks/throughput.py --preset fast     # issue 59's shape

Our PPO runs a preset (``--preset``: ``minigrid``, our defaults on MiniGrid, or ``fast``) with
the keys a run decides for itself decided as ``python -m rlmem.train`` decides them
(:meth:`rlmem.agents.ppo.PPOConfig.decided`, ``vectorization`` left to ``auto``: Adam's fused
kernel, the update's threads), on the env backend a run of that preset takes by default
(``--env-backend``: gymnasium for ``minigrid``, as before the tensor envs, which are faster;
tensor for ``fast``). sb3-contrib's ``RecurrentPPO`` trains on gymnasium envs of the same env
and number (``DummyVecEnv``, stepped in this process, each making its view with
:func:`rlmem.envs.minigrid_view.use_direct_view` as ``rlmem.envs`` does;
``--sb3-minigrid-view`` gives them MiniGrid's own, slower ``gen_obs``), with the preset's
rollout length, epochs, minibatch, lr, entropy bonus, gradient clip and LSTM size
(``MlpLstmPolicy``: it flattens the 7×7×3 view where ours embeds and convolves it). After one
warm-up update each, the trainers take turns, one full update (rollout + optimisation) at a
time, so that load from other processes on a shared machine hits all of them alike; frames/s
is the total frames over the total time of each trainer's timed updates.

With ``--sb3-defaults`` sb3-contrib also runs with its own defaults (LSTM 256 for actor and
critic, 10 epochs, batch 128, the preset's envs and rollout), which is much slower still.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch
from cuda_check import Trainer
from minigrid.wrappers import ImgObsWrapper
from omegaconf import OmegaConf

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.config import decided_value
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.presets import PRESETS, Preset
from rlmem.agents.ppo.tensor_collector import TensorRolloutCollector
from rlmem.agents.ppo.update import PPO
from rlmem.cells import cell_config
from rlmem.envs import EnvOptions, env_spec
from rlmem.envs.backend import GYMNASIUM, TENSOR
from rlmem.envs.minigrid_view import use_direct_view
from rlmem.envs.tensor import TensorVectorEnv

DEFAULT_BACKENDS = {Preset.minigrid: GYMNASIUM, Preset.fast: TENSOR}
"""Each preset's envs unless ``--env-backend`` says otherwise."""


KERNEL_KEYS = ("folded_grid", "compiled_lstm", "blocked_products", "memory_products")
"""The agent keys that choose the model's kernels (:class:`rlmem.agents.ppo.run_pieces.
KernelOptions`), as far as a version has them."""


def decided_config(env: str, preset: Preset, memory: str = "lstm") -> PPOConfig:
    """``preset``'s agent section with every key a run decides decided as ``rlmem.train``
    decides it on this machine for ``memory`` (``vectorization`` left to ``auto``; some keys,
    such as ``compiled_lstm``, apply to one memory only), typed as a run trains with it (a
    structured ``DictConfig`` would cost each of the update's reads of it)."""
    return PPOConfig(**PPOConfig.decided({"preset": preset.value},
                                         {"env": env, "memory": {"name": memory}}))


def matched(config: PPOConfig) -> dict[str, Any]:
    """sb3-contrib's hyperparameters set to ``config``'s (rollout, epochs, minibatch, lr,
    entropy bonus, gradient clip, LSTM size)."""
    return {"n_steps": decided_value(config, "frames_per_env"),
            "n_epochs": decided_value(config, "epochs"),
            "batch_size": decided_value(config, "batch_size"), "learning_rate": config.lr,
            "ent_coef": decided_value(config, "entropy_coef"),
            "max_grad_norm": config.max_grad_norm,
            "policy_kwargs": {"lstm_hidden_size": PRESETS[Preset(config.preset)].memory_size}}


def ours(env: str, num_envs: int, memory: str, config: PPOConfig, backend: str) -> Trainer:
    """Our PPO's pieces: ``step()`` is one update (collect, then update)."""
    torch.manual_seed(0)
    torch.set_num_threads(max(torch.get_num_threads(), config.update_threads or 1))
    envs = EnvOptions().make_vector(env, num_envs, backend=backend, device="cpu")
    # the kernels this version's config has: compare_commits.py runs this trainer over older
    # versions of rlmem too, whose config and model lack the later keys
    kernels: dict[str, Any] = {key: bool(getattr(config, key)) for key in KERNEL_KEYS
                               if hasattr(config, key)}
    model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                        OmegaConf.structured(cell_config(memory)), **kernels)
    ppo = PPO(model, config)
    collector = (TensorRolloutCollector(envs, model, torch.device("cpu"), seed=0)
                 if isinstance(envs, TensorVectorEnv)
                 else RolloutCollector(envs, model, torch.device("cpu"), seed=0))
    steps = int(decided_value(config, "frames_per_env"))
    recurrence = int(decided_value(config, "recurrence"))
    return Trainer(lambda: collector.collect(steps, recurrence),
                   ppo.update,  # type: ignore[arg-type]
                   num_envs * steps, envs.close)


def sb3(env: str, num_envs: int, direct_view: bool = True, *, n_steps: int, **kwargs: Any
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
    model = RecurrentPPO("MlpLstmPolicy", vec, n_steps=n_steps, seed=0, device="cpu",
                         verbose=0, **kwargs)
    first = [True]

    def update() -> None:
        model.learn(total_timesteps=num_envs * n_steps, reset_num_timesteps=first[0])
        first[0] = False

    return update


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="DoorKey-5x5")
    parser.add_argument("--preset", type=Preset, default=Preset.minigrid,
                        choices=[Preset.minigrid, Preset.fast], help="our PPO's recipe")
    parser.add_argument("--env-backend", choices=[GYMNASIUM, TENSOR], default=None,
                        help="our PPO's envs (default: the preset's, see the docstring)")
    parser.add_argument("--num-envs", type=int, default=None,
                        help="envs of every trainer (default: the preset's)")
    parser.add_argument("--memories", nargs="+", default=["lstm"],
                        help="our cells; ratios are against the first (sb3 runs its LSTM)")
    parser.add_argument("--no-sb3", action="store_true", help="time our PPO's cells only")
    parser.add_argument("--updates", type=int, default=10, help="timed updates per trainer")
    parser.add_argument("--sb3-defaults", action="store_true",
                        help="also time RecurrentPPO with its default hyperparameters")
    parser.add_argument("--sb3-minigrid-view", action="store_true",
                        help="sb3's envs make their view with MiniGrid's own gen_obs")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for all (ours: at least its update's threads)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    config = decided_config(args.env, args.preset)
    num_envs = args.num_envs or PRESETS[args.preset].num_envs
    backend = args.env_backend or DEFAULT_BACKENDS[args.preset]
    steps = int(decided_value(config, "frames_per_env"))

    trainers: dict[str, Callable[[], object]] = {
        f"ours ({memory})": ours(args.env, num_envs, memory,
                                 decided_config(args.env, args.preset, memory), backend).step
        for memory in args.memories}
    if not args.no_sb3:
        trainers["sb3-contrib, our hparams"] = sb3(args.env, num_envs, not args.sb3_minigrid_view,
                                                   **matched(config))
    if args.sb3_defaults:
        trainers["sb3-contrib defaults"] = sb3(args.env, num_envs, not args.sb3_minigrid_view,
                                               n_steps=steps)
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
            f"{name} {(index + 1) * num_envs * steps / seconds[name]:.0f}"
            for name in trainers), flush=True)

    frames = args.updates * num_envs * steps
    fps = {name: frames / total for name, total in seconds.items()}
    first = f"ours ({args.memories[0]})"
    print(f"\n{args.env}, {num_envs} envs, {steps} frames/env/update, {args.preset.value} "
          f"preset (ours on {backend} envs; fused Adam {config.fused_adam}, "
          f"{config.update_threads} update threads), "
          f"{args.updates} alternating updates each (frames/s); load average "
          f"{load_before:.2f} before, {os.getloadavg()[0]:.2f} after:")
    for name, value in fps.items():
        ratio = "" if name == first else (
            f"   this / {first} = {value / fps[first]:.2f}x" if name.startswith("ours")
            else f"   {first} / this = {fps[first] / value:.2f}x")
        print(f"  {name:<26} {value:8.0f}{ratio}")


if __name__ == "__main__":
    main()

"""Frames per second of RecurrentPPO on a MiniGrid env: rlmem cells vs sb3-contrib's own LSTM.

Every contender uses the same features extractor (:class:`rlmem.agents.sb3.MiniGridExtractor`,
``normalize_images=False``), heads and PPO settings; only the recurrent core differs:

- ``sb3-lstm``: sb3-contrib's own policy (``MultiInputLstmPolicy``, an ``nn.LSTM``);
- any registered cell name (``lstm``, ``relstm``, ...): :class:`rlmem.agents.sb3.MemoryPolicy`.

It reports the overall frames/s of ``learn`` and how the wall time splits between collecting
rollouts and the PPO update::

    OMP_NUM_THREADS=1 python benchmarks/sb3_throughput.py --env DoorKey-5x5 \\
        --contenders sb3-lstm lstm relstm --frames 16384
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.ppo_recurrent import MultiInputLstmPolicy
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecEnv

from rlmem.agents.sb3 import MemoryCallback, MiniGridExtractor, MultiInputMemoryPolicy
from rlmem.cells import CELLS
from rlmem.envs import make_env

SB3_LSTM = "sb3-lstm"
"""The contender name of sb3-contrib's own LSTM policy."""


class _RolloutTimer(BaseCallback):
    """Accumulates the wall time spent inside ``collect_rollouts``."""

    def __init__(self) -> None:
        super().__init__()
        self.rollout_seconds = 0.0
        self._start = 0.0

    def _on_rollout_start(self) -> None:
        self._start = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.rollout_seconds += time.perf_counter() - self._start

    def _on_step(self) -> bool:
        return True


def build(contender: str, env: VecEnv, args: argparse.Namespace) -> tuple[RecurrentPPO,
                                                                          list[BaseCallback]]:
    """The RecurrentPPO model of ``contender`` and the callbacks it needs."""
    common: dict[str, Any] = dict(features_extractor_class=MiniGridExtractor,
                                  normalize_images=False,
                                  net_arch=dict(pi=[64], vf=[64]))
    ppo: dict[str, Any] = dict(n_steps=args.n_steps, batch_size=args.batch_size,
                               n_epochs=args.epochs, seed=args.seed, device="cpu")
    if contender == SB3_LSTM:
        return RecurrentPPO(MultiInputLstmPolicy, env, **ppo,
                            policy_kwargs=dict(**common, lstm_hidden_size=args.hidden)), []
    return RecurrentPPO(MultiInputMemoryPolicy, env, **ppo, policy_kwargs=dict(
        **common, memory=contender, memory_kwargs=dict(hidden_size=args.hidden))), \
        [MemoryCallback()]


def measure(contender: str, args: argparse.Namespace,
            env_fn: Callable[[], gym.Env]) -> dict[str, float | str]:
    """Train ``contender`` for ``args.frames`` frames after one warm-up update; time it."""
    env = make_vec_env(env_fn, n_envs=args.n_envs, seed=args.seed)
    model, callbacks = build(contender, env, args)
    model.learn(args.n_envs * args.n_steps, callback=list(callbacks))  # warm-up
    timer = _RolloutTimer()
    start_frames = model.num_timesteps
    start = time.perf_counter()
    model.learn(args.frames, callback=[*callbacks, timer], reset_num_timesteps=False)
    seconds = time.perf_counter() - start
    frames = model.num_timesteps - start_frames
    env.close()
    policy = model.policy
    assert isinstance(policy, RecurrentActorCriticPolicy)  # both contenders' policies are one
    return {"contender": contender, "frames": frames, "seconds": round(seconds, 2),
            "fps": round(frames / seconds, 1),
            "rollout_fps": round(frames / timer.rollout_seconds, 1),
            "update_share": round(1 - timer.rollout_seconds / seconds, 3),
            "packed_hidden": policy.lstm_actor.hidden_size}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="DoorKey-5x5", help="rlmem short name or gym id")
    parser.add_argument("--contenders", nargs="+", default=[SB3_LSTM, "lstm", "relstm"],
                        help=f"{SB3_LSTM} and/or registered cells: {', '.join(sorted(CELLS))}")
    parser.add_argument("--frames", type=int, default=16384, help="frames timed per contender")
    parser.add_argument("--n-envs", type=int, default=16, help="parallel envs")
    parser.add_argument("--n-steps", type=int, default=128, help="steps per env per rollout")
    parser.add_argument("--batch-size", type=int, default=256, help="PPO minibatch (frames)")
    parser.add_argument("--epochs", type=int, default=4, help="PPO epochs per update")
    parser.add_argument("--hidden", type=int, default=64, help="memory hidden size")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--seed", type=int, default=0, help="seed")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    unknown = [name for name in args.contenders if name != SB3_LSTM and name not in CELLS]
    if unknown:
        parser.error(f"unknown contender(s) {unknown}; use {SB3_LSTM} or one of "
                     f"{', '.join(sorted(CELLS))}")
    torch.set_num_threads(args.threads)

    def env_fn() -> gym.Env:
        return make_env(args.env)

    results = []
    print(f"{'contender':>10} {'fps':>8} {'rollout fps':>12} {'update share':>13} "
          f"{'packed (h,c) width':>19}")
    for contender in args.contenders:
        result = measure(contender, args, env_fn)
        results.append(result)
        print(f"{contender:>10} {result['fps']:>8} {result['rollout_fps']:>12} "
              f"{result['update_share']:>13} {result['packed_hidden']:>19}", flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"args": vars(args), "results": results}, file, indent=2)


if __name__ == "__main__":
    main()

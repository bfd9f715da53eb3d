"""The suite's outside reference: sb3-contrib's own RecurrentPPO on a POPGym env, logged like
our runs.

    python -m experiments.popgym.sb3_reference --env popgym:popgym-RepeatPreviousEasy-v0 \\
        --seed 0 --frames 163840 --run-dir experiments/popgym/runs/RepeatPreviousEasy/sb3/seed0

Unlike ``python -m rlmem.train agent=sb3`` (our adapter: our encoders and cells inside
RecurrentPPO), this is sb3-contrib as a user would run it: ``MlpLstmPolicy`` with every one of
its defaults (a 256-unit LSTM for the actor and another for the critic, 64-64 tanh heads, torch's
LSTM initialisation, normalised advantages, no entropy bonus), except the four keys matched to our
PPO so that both see the same data per update and take as many gradient steps: ``n_steps`` (our
``agent.frames_per_env``), ``batch_size``, ``n_epochs`` (our ``agent.epochs``), ``learning_rate``
(our ``agent.lr``), with as many envs (our ``num_envs``). Those are read from our train config as
``python -m rlmem.train env=<env>`` composes it (:func:`matched_keys`), so they follow our
defaults when they change.

The run directory receives ``config.yaml`` (what was run, the matched keys and the versions),
``progress.csv`` with our runs' columns (one row per update: ``episodes``, ``return_mean``,
``return_recent``, ...; written by our adapter's :class:`~rlmem.agents.sb3.recorder.RunRecorder`
from SB3's ``Monitor`` episodes), which :mod:`experiments.popgym.mmer` reads for both, and
TensorBoard events in ``tb/``. It keeps no checkpoint: a run that did not reach its frames starts
again from zero (its partial ``progress.csv`` is replaced), and one that did returns at once. It
holds the run's lock (``.lock``, :class:`~rlmem.runs.lock.RunLock`) while it trains.

Observations: SB3 one-hot encodes ``Discrete`` itself; a ``MultiDiscrete`` (CountRecall's) or
a ``Tuple`` (Autoencode's) is flattened to one-hot by gymnasium's ``FlattenObservation``
(:func:`make_env`), as our runs of Autoencode are (``suite.ENV_OVERRIDES``). Nothing else is
added (no previous action; POPGym's own baselines add it, ours do not either).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import sb3_contrib
import stable_baselines3
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from sb3_contrib import RecurrentPPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

import rlmem.train  # noqa: F401  - registers the train config's schema, which compose needs
from experiments.common.sweep import final_frames
from rlmem.agents.derived import decided_num_envs
from rlmem.agents.ppo.presets import decide_presets
from rlmem.agents.sb3.recorder import RunRecorder
from rlmem.envs import env_spec
from rlmem.runs import RunLogger
from rlmem.runs.errors import reported_as_cli_errors
from rlmem.runs.lock import RunLock

POLICY = "MlpLstmPolicy"
PROGRAM = "experiments.popgym.sb3_reference"


@dataclass(frozen=True)
class MatchedKeys:
    """RecurrentPPO's keys set to our PPO's values; every other key is sb3-contrib's default."""

    n_envs: int
    n_steps: int
    batch_size: int
    n_epochs: int
    learning_rate: float


def matched_keys(env: str) -> MatchedKeys:
    """Our PPO's ``num_envs``, ``agent.frames_per_env``, ``agent.batch_size``,
    ``agent.epochs`` and ``agent.lr`` for ``env``, as ``python -m rlmem.train env=<env>``
    decides them: composed, then the env family's preset applied
    (:func:`~rlmem.agents.ppo.presets.decide_presets`), should a preset ever set one of them."""
    with initialize_config_module("rlmem.conf", version_base="1.3"):
        cfg = compose("train", overrides=[f"env={env}"])
    composed = OmegaConf.to_container(cfg.agent, resolve=True, enum_to_str=True)
    assert isinstance(composed, dict)  # the agent section is a mapping
    agent = decide_presets({str(key): value for key, value in composed.items()}, env)
    num_envs = cfg.num_envs if cfg.num_envs is not None else decided_num_envs({"agent": agent})
    return MatchedKeys(int(num_envs), int(agent["frames_per_env"]),
                       int(agent["batch_size"]), int(agent["epochs"]), float(agent["lr"]))


def make_env(env: str) -> gym.Env[Any, Any]:
    """``env`` (a short name, a gymnasium id or ``module:EnvId``) as ``MlpLstmPolicy`` can
    read it: a ``Tuple``, ``Dict`` or ``MultiDiscrete`` observation flattened to one one-hot
    ``Box`` (for ``MultiDiscrete`` the encoding SB3 would make itself, but with sizes of
    Python's ``int``: SB3 sums numpy's, which torch's LSTM refuses as its input size)."""
    made: gym.Env[Any, Any] = gym.make(env_spec(env).id)
    if isinstance(made.observation_space,
                  gym.spaces.Tuple | gym.spaces.Dict | gym.spaces.MultiDiscrete):
        made = gym.wrappers.FlattenObservation(made)
    return made


def train(env: str, seed: int, frames: int, run_dir: Path) -> None:
    """Train RecurrentPPO on ``env`` at ``seed`` for ``frames`` into ``run_dir``; return at
    once when its ``progress.csv`` already reaches ``frames``.

    Raises:
        RunLockedError: another process holds ``run_dir``.
    """
    with RunLock(run_dir):
        done = final_frames(run_dir)
        if done is not None and done >= frames:
            print(f"{run_dir}: finished ({done} frames)", flush=True)
            return
        keys = matched_keys(env)
        if frames % (keys.n_envs * keys.n_steps):
            raise ValueError(f"frames={frames} is not a whole number of updates of "
                             f"{keys.n_envs} envs × {keys.n_steps} steps")
        config = {"agent": "sb3_recurrent_ppo", "policy": POLICY, "env": env, "seed": seed,
                  "frames": frames, "matched": asdict(keys),
                  "versions": {"sb3_contrib": sb3_contrib.__version__,
                               "stable_baselines3": stable_baselines3.__version__}}
        OmegaConf.save(OmegaConf.create(config), run_dir / "config.yaml")
        vec_env = make_vec_env(lambda: make_env(env), n_envs=keys.n_envs, seed=seed,
                               vec_env_cls=DummyVecEnv)
        model = RecurrentPPO(POLICY, vec_env, n_steps=keys.n_steps, batch_size=keys.batch_size,
                             n_epochs=keys.n_epochs, learning_rate=keys.learning_rate,
                             seed=seed, device="cpu")
        logger = RunLogger(run_dir, "frames")  # a fresh run: replaces a partial progress.csv
        recorder = RunRecorder(logger, save=lambda frames, updates: None, frames=0, updates=0,
                               total_frames=frames, progress_bar=False)
        try:
            model.learn(total_timesteps=frames, callback=recorder)
        finally:
            logger.close()
            vec_env.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="short name, gymnasium id or module:EnvId")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--frames", type=int, required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    with reported_as_cli_errors(PROGRAM):
        train(args.env, args.seed, args.frames, args.run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())

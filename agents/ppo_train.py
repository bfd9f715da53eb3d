"""The training run of our PPO: envs, model, updates, logging, checkpoints and resuming.

Called by ``python -m rlmem.train agent=ppo`` through :data:`rlmem.agents.trainers.TRAINERS`.
The run directory receives ``config.yaml`` (resolved), ``progress.csv`` and TensorBoard
events (one row per update: ``return_mean`` over the episodes that ended during the update,
``return_recent`` over the last 100 episodes) and ``checkpoint.pt`` (after every update,
atomically, so a killed run loses at most one update and a non-finite loss leaves the last
good one in place).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from rlmem.agents.model import ActorCritic
from rlmem.agents.ppo import PPO, NonFiniteLossError
from rlmem.agents.rollout import RolloutCollector
from rlmem.envs import EnvOptions, describe_space, env_spec
from rlmem.runs import Checkpoint, ResumeRules, RunLogger, RunSession, open_run
from rlmem.runs.checkpoint import on_disk
from rlmem.runs.episodes import STOP_EPISODES, EpisodeLog

RESUME_SECTIONS = ("env", "env_kwargs", "wrappers", "memory", "agent", "num_envs", "mission",
                   "grid_encoding", "discrete_encoding", "seed")
"""Keys that must match a checkpoint to resume from it (``frames`` may grow). ``transfer_env``
is not one: it only names where the run is evaluated."""


def env_seed(seed: int, updates: int) -> int:
    """The seed of the envs' first reset when (re)starting after ``updates`` updates; distinct
    runs' seeds do not overlap across their envs as ``seed + env index`` would."""
    return int(np.random.SeedSequence([seed, updates]).generate_state(1)[0])


RULES = ResumeRules(sections=RESUME_SECTIONS, counter="frames", budget="frames",
                    same={"env": lambda name: env_spec(name).id})
"""A run resumes a checkpoint of the same config; ``frames`` may grow, and an env may be
named by its short name or its gymnasium id."""


def train(cfg: Any, run_dir: Path) -> None:
    """Train (or resume) our PPO as configured by ``cfg`` into ``run_dir``.

    Raises:
        rlmem.runs.CheckpointMismatchError: ``run_dir`` holds a checkpoint of another config.
        NonFiniteLossError: the loss, the weights or the policy diverged; the last good
            checkpoint is kept.
    """
    config = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(config, dict)
    frames_per_update = cfg.num_envs * cfg.agent.frames_per_env
    if cfg.frames % frames_per_update:
        updates_needed = -(-cfg.frames // frames_per_update)
        print(f"frames={cfg.frames} is not a whole number of updates of num_envs={cfg.num_envs} "
              f"× agent.frames_per_env={cfg.agent.frames_per_env}: training "
              f"{updates_needed * frames_per_update} frames ({updates_needed} updates).",
              flush=True)
    with open_run(run_dir, config, RULES, program="rlmem.train") as run:
        if not run.finished:
            _train(cfg, config, run)


def _train(cfg: Any, config: dict[str, Any], run: RunSession) -> None:
    torch.manual_seed(cfg.seed)
    envs = EnvOptions.from_config(config).make_vector(cfg.env, cfg.num_envs, cfg.vectorization)
    model = ActorCritic(envs.single_observation_space, envs.single_action_space, cfg.memory,
                        grid_encoding=cfg.grid_encoding,
                        discrete_encoding=cfg.discrete_encoding).to(run.device)
    spaces = {"observation": describe_space(envs.single_observation_space),
              "action": describe_space(envs.single_action_space)}
    ppo = PPO(model, cfg.agent)
    start = run.checkpoint
    frames, updates = (start.count("frames"), start.count("updates")) if start else (0, 0)
    episodes = EpisodeLog(start.extras.get("recent_returns", []) if start else ())
    if start is not None:
        model.load_state_dict(start.states["model"])
        ppo.load_state_dict({"optimizer": start.states["optimizer"]})
        torch.set_rng_state(start.rng["torch"].cpu())

    collector = RolloutCollector(envs, model, run.device, seed=env_seed(cfg.seed, updates))
    frames_per_update = cfg.num_envs * cfg.agent.frames_per_env
    logger = RunLogger(run.run_dir, "frames", resume_step=frames if start is not None else None)
    bar = tqdm(total=cfg.frames, initial=min(frames, cfg.frames), unit="frames",
               disable=not cfg.progress_bar, dynamic_ncols=True)
    try:
        while (frames < cfg.frames and not episodes.reached(cfg.stop_return)
               and not run.stop_requested):
            clock = time.perf_counter()
            rollout = collector.collect(cfg.agent.frames_per_env, cfg.agent.recurrence)
            metrics = ppo.update(rollout, progress=frames / cfg.frames)
            frames += frames_per_update
            updates += 1
            fps = frames_per_update / (time.perf_counter() - clock)

            row = {"frames": frames, "updates": updates, "fps": fps,
                   **episodes.columns(rollout.episode_returns, rollout.episode_lengths),
                   **metrics}
            # The row first: a run killed before the checkpoint resumes from the previous one,
            # and the logger drops the rows past it, so progress.csv never has a gap.
            logger.log(row)
            run.save(Checkpoint(
                config=config, progress={"frames": frames, "updates": updates},
                states={"model": model.state_dict(), **ppo.state_dict()},
                rng={"torch": torch.get_rng_state()},
                extras={"recent_returns": list(episodes.recent), "spaces": spaces}))
            bar.update(min(frames, cfg.frames) - bar.n)
            bar.set_postfix(fps=f"{fps:.0f}", ret=f"{row['return_recent']:.3f}")
        if episodes.reached(cfg.stop_return):
            print(f"Stopped at {frames} frames: the mean return of the last {STOP_EPISODES} "
                  f"episodes, {episodes.recent_mean(STOP_EPISODES):.3f}, reached stop_return="
                  f"{cfg.stop_return}.", flush=True)
    except NonFiniteLossError as error:
        raise NonFiniteLossError(f"{error} Training stopped at {frames} frames. "
                                 f"{on_disk(run.checkpoint_path)}") from error
    finally:
        bar.close()
        logger.close()
        envs.close()

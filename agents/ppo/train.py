"""The training run of our PPO: envs, model, updates, logging, checkpoints and resuming.

Called by ``python -m rlmem.train agent=ppo`` (:func:`rlmem.train.train`, through the
registry), with the run's config and the opened run.
The run directory receives ``config.yaml`` (resolved, derived values decided),
``progress.csv`` and TensorBoard events (one row per update: ``return_mean`` over the episodes
that ended during the update, ``return_recent`` over the last 100 episodes) and
``checkpoint.pt`` (after every update, atomically, so a killed run loses at most one update and
a non-finite loss leaves the last good one in place).

With ``agent.processes`` above 1 this process leads a data-parallel run
(:mod:`~rlmem.agents.ppo.replicas`): it starts the other replicas once the run is restored
(:class:`~rlmem.agents.ppo.replica_processes.ReplicaProcesses`, each running
:func:`replica_main`), and alone logs, saves and decides when to stop. Every replica runs the
same update (:func:`_one_update`) on its own share of the envs.
"""

from __future__ import annotations

import dataclasses
import functools
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from rlmem.agents.env_output import EnvOutputError
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.config import PPOConfig, decided_value
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.replica_processes import ReplicaProcesses, new_exchange
from rlmem.agents.ppo.replicas import LEADER, Exchange, ReplicaError, Replicas
from rlmem.agents.ppo.rollout import chunks_per_minibatch
from rlmem.agents.ppo.run_pieces import collector_of, make_envs, make_model
from rlmem.agents.ppo.update import PPO
from rlmem.agents.run import env_seed, frames_to_train, rounding_notice
from rlmem.agents.run_config import RunConfig
from rlmem.envs import EnvWorkerError, describe_space
from rlmem.runs import Checkpoint, NonFiniteLossError, RunLogger, RunSession
from rlmem.runs.arithmetic import subnormal_floats
from rlmem.runs.checkpoint import on_disk
from rlmem.runs.episode_stats import STOP_EPISODES, EpisodeLog
from rlmem.runs.restore import ON_RESUME, load_state, restore_rng

Config = RunConfig[PPOConfig]
"""The run's config, its agent ours."""


def train(config: Config, run: RunSession) -> None:
    """Train (or resume) our PPO as ``config`` says in ``run``, which has not reached its
    frames.

    Raises:
        NonFiniteLossError: the loss, the weights or the policy diverged; the last good
            checkpoint is kept.
    """
    agent = config.agent
    frames_per_update = _frames_per_update(config)
    update = (f"num_envs={config.num_envs} × agent.frames_per_env="
              f"{int(decided_value(agent, 'frames_per_env'))}")
    for notice in (rounding_notice(config.frames, frames_per_update, update),
                   minibatch_notice(frames_per_update, agent, update)):
        if notice is not None:
            print(notice, flush=True)
    torch.manual_seed(config.seed)
    share = _share(config)
    envs = make_envs(share, run.device)
    try:
        model = make_model(config, envs, run.device)
        exchange = (new_exchange(agent.processes, Exchange.width_for(
            model.trainable_parameters(), _frames_per_update(share)))
            if agent.processes > 1 else None)
        replicas = None if exchange is None else Replicas(exchange, LEADER)
        ppo = PPO(model, agent, replicas)
        frames, updates, episodes = _restore(run.checkpoint, run.checkpoint_path, model, ppo)
        collector = collector_of(config)(
            envs, model, run.device, seed=env_seed(config.seed, updates), name=config.env,
            frames=frames)
    except BaseException:
        envs.close()  # an async run's workers must not outlive the run
        raise
    save = functools.partial(_save, run, config, model, ppo, episodes, spaces={
        "observation": describe_space(envs.single_observation_space),
        "action": describe_space(envs.single_action_space)})
    try:
        if exchange is None:
            _loop(config, run, model, ppo, collector, episodes, save, frames, updates)
        else:
            states = {"model": model.state_dict(), **ppo.state_dict()}
            with ReplicaProcesses(exchange, replica_main, [
                    (config, rank, exchange, states, frames, updates)
                    for rank in range(LEADER + 1, agent.processes)]):
                _loop(config, run, model, ppo, collector, episodes, save, frames, updates)
    finally:
        envs.close()


def replica_main(config: Config, rank: int, exchange: Exchange, states: dict[str, Any],
                 frames: int, updates: int) -> None:
    """One replica of a data-parallel run but the leader, in a process of its own
    (:class:`~rlmem.agents.ppo.replica_processes.ReplicaProcesses`): the leader's weights and
    optimizer state, its own share of the envs and its own draws (:func:`env_seed` of its
    rank), the same updates as the leader's until the leader says stop. A failure is said to
    the others (:meth:`~rlmem.agents.ppo.replicas.Replicas.abandon`), not raised: the leader
    reports it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the leader turns Ctrl-C into a stop
    replicas = Replicas(exchange, rank)
    device = torch.device("cpu")
    try:
        torch.set_num_threads(config.torch_threads)
        with subnormal_floats(config.flush_denormal):
            torch.manual_seed(env_seed(config.seed, updates, rank))
            envs = make_envs(_share(config), device)
            model = make_model(config, envs, device)
            model.load_state_dict(states["model"])
            ppo = PPO(model, config.agent, replicas)
            ppo.load_state_dict(states)
            collector = collector_of(config)(envs, model, device,
                                             seed=env_seed(config.seed, updates, rank),
                                             name=config.env, frames=frames)
            frames_per_update = _frames_per_update(config)
            while replicas.leader_says(False):  # said once before the first update and
                _one_update(config, model, ppo, collector, frames, replicas)  # after each
                frames += frames_per_update
    except ReplicaError:
        return  # the run stopped elsewhere, and the leader says why
    except BaseException as error:  # every failure is said to the leader, who reports it
        replicas.abandon(f"replica {rank} failed: {type(error).__name__}: {error}")


def _frames_per_update(config: Config) -> int:
    """The frames of one update, every replica's together: ``num_envs × frames_per_env``."""
    return config.num_envs * int(decided_value(config.agent, "frames_per_env"))


def minibatch_notice(frames_per_update: int, agent: PPOConfig, update: str) -> str | None:
    """What to tell a user whose update of ``frames_per_update`` frames (``update`` spells how
    they are made) is not a whole number of ``agent``'s minibatches: each epoch then ends with a
    smaller one (:meth:`~rlmem.agents.ppo.rollout.ChunkBatch.minibatches`), which weighs its
    chunks more in that step; None where they divide."""
    chunk = agent.chunk_length
    per_batch = chunks_per_minibatch(int(decided_value(agent, "batch_size")), chunk)
    last = frames_per_update // chunk % per_batch
    if last == 0:
        return None
    return (f"{update} = {frames_per_update} frames an update is not a whole number of "
            f"minibatches of agent.batch_size={per_batch * chunk}: each epoch ends with a "
            f"minibatch of {last * chunk} frames.")


def _share(config: Config) -> Config:
    """``config`` with this process's share of the envs (``num_envs / agent.processes``)."""
    processes = config.agent.processes
    return config if processes == 1 else dataclasses.replace(
        config, num_envs=config.num_envs // processes)


def _one_update(config: Config, model: ActorCritic, ppo: PPO, collector: RolloutCollector,
                frames: int, replicas: Replicas | None
                ) -> tuple[dict[str, float], list[float], list[int]]:
    """Collect a rollout and update on it, ``frames`` trained before it; return the update's
    metrics and the episodes that ended in it (every replica's, in replica order)."""
    rollout = collector.collect(int(decided_value(config.agent, "frames_per_env")),
                                config.agent.chunk_length)
    model.anneal(frames / config.frames)  # e.g. SA-RNN's slope schedule
    metrics = ppo.update(rollout)
    if replicas is None:
        return metrics, rollout.episode_returns, rollout.episode_lengths
    return metrics, *replicas.episodes(rollout.episode_returns, rollout.episode_lengths)


def _loop(config: Config, run: RunSession, model: ActorCritic, ppo: PPO,
          collector: RolloutCollector, episodes: EpisodeLog, save: Callable[[int, int], None],
          frames: int, updates: int) -> None:
    """Update until the run reaches its frames, its ``stop_return`` or a Ctrl-C, logging a row
    and saving a checkpoint after each update.

    Raises:
        NonFiniteLossError, EnvOutputError, EnvWorkerError, ReplicaError: saying where
            training stopped and what is safe on disk.
    """
    frames_per_update = _frames_per_update(config)
    logger = RunLogger(run.run_dir, "frames",
                       resume_step=frames if run.checkpoint is not None else None)
    total = frames_to_train(config.frames, frames_per_update)
    bar = tqdm(total=total, initial=min(frames, total), unit="frames",
               disable=not config.progress_bar, dynamic_ncols=True)
    replicas = ppo.replicas

    def go_on() -> bool:
        """Whether to train another update: the leader's decision, told to every replica."""
        return _go_on(frames < config.frames and not episodes.reached(config.stop_return)
                      and not run.stop_requested, replicas)

    try:
        go = go_on()
        while go:
            clock = time.perf_counter()
            metrics, returns, lengths = _one_update(config, model, ppo, collector, frames,
                                                    replicas)
            frames, updates = frames + frames_per_update, updates + 1
            row = {"frames": frames, "updates": updates,
                   "fps": frames_per_update / (time.perf_counter() - clock),
                   **episodes.columns(returns, lengths), **metrics}
            # Decided before this process logs and saves, so that the other replicas of a
            # data-parallel run collect their next rollout meanwhile.
            go = go_on()
            # The row first: a run killed before the checkpoint resumes from the previous one,
            # and the logger drops the rows past it, so progress.csv never has a gap.
            logger.log(row)
            save(frames, updates)
            bar.update(min(frames, total) - bar.n)
            bar.set_postfix(fps=f"{row['fps']:.0f}", ret=f"{row['return_recent']:.3f}")
        if episodes.reached(config.stop_return):
            print(f"Stopped at {frames} frames: the mean return of the last {STOP_EPISODES} "
                  f"episodes, {episodes.recent_mean(STOP_EPISODES):.3f}, reached stop_return="
                  f"{config.stop_return}.", flush=True)
    except (NonFiniteLossError, EnvOutputError, EnvWorkerError, ReplicaError) as error:
        raise type(error)(f"{error} Training stopped at {frames} frames. "
                          f"{on_disk(run.checkpoint_path)}") from error
    finally:
        bar.close()
        logger.close()


def _go_on(decision: bool, replicas: Replicas | None) -> bool:
    """The leader's ``decision`` to train another update, told to every replica."""
    return decision if replicas is None else replicas.leader_says(decision)


def _restore(start: Checkpoint | None, path: Path, model: ActorCritic,
             ppo: PPO) -> tuple[int, int, EpisodeLog]:
    """Load a checkpoint's weights, optimizer and RNG state; return its frames, updates and
    recent returns (zeros and an empty log for a fresh run).

    Raises:
        IncompatibleStateError: the checkpoint at ``path`` holds states that do not fit the
            model and optimizer of its own config.
    """
    if start is None:
        return 0, 0, EpisodeLog()
    load_state(model, start, "model", path, ON_RESUME)
    load_state(ppo.optimizer, start, "optimizer", path, ON_RESUME)
    ppo.use_the_runs_kernels()
    restore_rng(torch.default_generator, start, "torch", path, ON_RESUME)
    return (start.count("frames"), start.count("updates"),
            EpisodeLog(start.extras.get("recent_returns", [])))


def _save(run: RunSession, config: Config, model: ActorCritic, ppo: PPO,
          episodes: EpisodeLog, frames: int, updates: int, *, spaces: dict[str, str]) -> None:
    run.save(Checkpoint(
        config=config.recorded(), progress={"frames": frames, "updates": updates},
        states={"model": model.state_dict(), **ppo.state_dict()},
        rng={"torch": torch.get_rng_state()},
        extras={"recent_returns": list(episodes.recent), "spaces": spaces}))

"""Evaluate a trained agent, on its training env or on any env with the same observations.

    python -m rlmem.evaluate run=runs/ppo/DoorKey-5x5/relstm/seed0 env=transfer episodes=100
    python -m rlmem.evaluate run=... env=DoorKey-8x8 argmax=true gif=3

Prints one summary line and writes ``<run>/eval/<env>.json`` (and ``<env>_<i>.gif``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import OmegaConf

from rlmem.agents.encoders import recorded_grid_encoding
from rlmem.agents.evaluation import (
    Actor,
    EvaluationResult,
    PPOActor,
    episode_quotas,
    evaluate_policy,
)
from rlmem.agents.model import ActorCritic
from rlmem.envs import (
    ENVS,
    EpisodeRecorder,
    env_spec,
    make_env,
    make_vector_env,
    resolved_mission,
    transfer_target,
)
from rlmem.envs.recording import write_gif
from rlmem.runs import (
    CHECKPOINT_NAME,
    Checkpoint,
    load_checkpoint,
    reported_as_cli_errors,
    resolve_device,
)
from rlmem.schema.evaluate import (
    TRANSFER,
    EvaluateConfig,
    check_evaluate_config,
    register_evaluate_configs,
)

register_evaluate_configs()


class IncompatibleEnvError(ValueError):
    """The env's observations do not match what the trained agent was trained on."""


def short_name(name: str) -> str:
    """The short name of an env if it has one (``MiniGrid-DoorKey-16x16-v0``: ``DoorKey-16x16``)."""
    spec = env_spec(name)
    return next((key for key, value in ENVS.items() if value == spec), name)


def load_run(run: Path) -> Checkpoint:
    """The checkpoint of an RL run directory, with a clear error when there is none."""
    path = run / CHECKPOINT_NAME
    if not run.is_dir():
        raise ValueError(f"run={run}: no such run directory")
    if not path.exists():
        raise ValueError(f"run={run}: no {CHECKPOINT_NAME} (has it trained for one update?)")
    checkpoint = load_checkpoint(path)
    config = checkpoint.config
    if "agent" not in config:
        task = config.get("task", {}).get("name", "?") if isinstance(config.get("task"),
                                                                     dict) else "?"
        raise ValueError(f"run={run} is a supervised run (task={task}), not an RL agent; its "
                         "results are in its progress.csv and its test metrics")
    if config["agent"]["name"] not in ACTOR_LOADERS:
        raise ValueError(f"run={run} was trained by agent={config['agent']['name']}; "
                         f"rlmem.evaluate evaluates {', '.join(ACTOR_LOADERS)} runs")
    return checkpoint


def ppo_actor(run: Path, checkpoint: Checkpoint, observation_space: Any, num_actions: int,
              device: torch.device, eval_memory: dict[str, Any]) -> Actor:
    """Our PPO's model, rebuilt from the run's recorded config (with ``eval_memory`` over its
    memory) and weights."""
    config = checkpoint.config
    model = ActorCritic(observation_space, num_actions, {**config["memory"], **eval_memory},
                        grid_encoding=recorded_grid_encoding(config))
    try:
        model.load_state_dict(checkpoint.states["model"])
    except RuntimeError as error:
        raise ValueError(f"eval_memory={eval_memory} changes the cell's weights; only "
                         f"weight-free hyperparameters may differ:\n{error}") from None
    return PPOActor(model.to(device).eval(), device)


def sb3_actor(run: Path, checkpoint: Checkpoint, observation_space: Any, num_actions: int,
              device: torch.device, eval_memory: dict[str, Any]) -> Actor:
    """The RecurrentPPO of an ``agent=sb3`` run."""
    from rlmem.agents.sb3.actor import SB3Actor  # stable-baselines3 only when needed
    from rlmem.agents.sb3.train import load_model

    if eval_memory:
        raise ValueError("eval_memory applies to agent=ppo runs; this is an agent=sb3 run")
    model = load_model(run, device=device)
    model.policy.set_training_mode(False)
    return SB3Actor(model)


ACTOR_LOADERS = {"ppo": ppo_actor, "sb3": sb3_actor}
"""How each trainer's run becomes an :class:`~rlmem.agents.evaluation.Actor`."""


def observation_signature(name: str, mission: bool) -> tuple[list[int], int, Any]:
    """The image shape, number of actions and observation space of env ``name``."""
    probe = make_env(name, mission=mission)
    try:
        return (list(probe.observation_space["image"].shape), int(probe.action_space.n),
                probe.observation_space)
    finally:
        probe.close()


def evaluate_run(cfg: EvaluateConfig) -> tuple[str, EvaluationResult, Path | None]:
    """Evaluate ``cfg.run`` on ``cfg.env``; return the env's name, the result and where its
    JSON was written (None when it could not be written; the error is printed)."""
    check_evaluate_config(cfg)
    run = Path(cfg.run)
    checkpoint = load_run(run)
    config = checkpoint.config
    trained_on = config["env"]
    name = short_name(transfer_target(trained_on) if cfg.env == TRANSFER else cfg.env)
    device = resolve_device(cfg.device)
    torch.set_num_threads(cfg.torch_threads)

    mission = resolved_mission(config)
    expected_image, expected_actions, _ = observation_signature(trained_on, mission)
    image_shape, num_actions, observation_space = observation_signature(name, mission)
    if image_shape != expected_image or num_actions != expected_actions:
        raise IncompatibleEnvError(
            f"env={name} observes images of shape {image_shape} with {num_actions} actions, but "
            f"the agent in {run} was trained on {trained_on} with images of shape "
            f"{expected_image} and {expected_actions} actions")
    eval_memory = dict(cfg.eval_memory)
    actor = ACTOR_LOADERS[config["agent"]["name"]](run, checkpoint, observation_space,
                                                   num_actions, device, eval_memory)

    num_envs = min(cfg.num_envs, cfg.episodes)
    quotas = episode_quotas(cfg.episodes, num_envs, first=cfg.gif)
    recorder: list[EpisodeRecorder] = []

    def make(index: int) -> Any:
        env = make_env(name, mission=mission)
        if index == 0 and cfg.gif:
            env = EpisodeRecorder(env, cfg.gif, tile_size=cfg.gif_tile_size)
            recorder.append(env)
        return env

    envs = make_vector_env(name, num_envs, env_fns=[lambda i=i: make(i)
                                                    for i in range(num_envs)])
    seed = int(np.random.SeedSequence([cfg.seed]).generate_state(1)[0])
    torch.manual_seed(seed)
    try:
        result, returns = evaluate_policy(actor, envs, cfg.episodes, greedy=cfg.argmax,
                                          seed=seed, quotas=quotas)
    finally:
        envs.close()
    # The result is printed by the caller whatever happens to the files below.
    report = {"env": name, "trained_on": trained_on, "frames": checkpoint.count("frames"),
              "agent": config["agent"]["name"], "argmax": cfg.argmax, "seed": cfg.seed,
              "eval_memory": eval_memory,
              **result.as_dict(), "returns": returns}
    out_dir = run / "eval"
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for index, frames in enumerate(recorder[0].recorded if recorder else []):
            write_gif(frames, out_dir / f"{name}_{index}.gif")
        target = out_dir / f"{name}.json"
        target.write_text(json.dumps(report, indent=2))
    except OSError as error:
        print(f"rlmem.evaluate: could not write the results into {out_dir}: {error}",
              file=sys.stderr, flush=True)
        return name, result, None
    return name, result, target


@hydra.main(config_path="conf", config_name="evaluate", version_base="1.3")
def main(cfg: Any) -> None:
    """Evaluate and print one summary line."""
    with reported_as_cli_errors("rlmem.evaluate"):
        typed: EvaluateConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
        name, result, written = evaluate_run(typed)
    print(f"{name}: {result.summary()}", flush=True)
    if written is None:
        sys.exit(1)


if __name__ == "__main__":
    main()

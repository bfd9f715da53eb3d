"""Evaluate a trained agent, on its training env or on any env with the same observations.

    python -m rlmem.evaluate run=runs/ppo/DoorKey-5x5/relstm/seed0 env=transfer episodes=100
    python -m rlmem.evaluate run=... env=DoorKey-8x8 argmax=true gif=3

Prints one summary line and writes ``<run>/eval/<env>.json`` (and ``<env>_<i>.gif``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from omegaconf import OmegaConf

from rlmem.agents.encoders import recorded_grid_encoding
from rlmem.agents.evaluation import EvaluationResult, episode_quotas, evaluate_policy
from rlmem.agents.model import ActorCritic
from rlmem.agents.ppo_train import CHECKPOINT_NAME
from rlmem.envs import ENVS, EpisodeRecorder, env_spec, make_env, make_vector_env, transfer_target
from rlmem.envs.recording import write_gif
from rlmem.runs import load_checkpoint, reported_as_cli_errors, resolve_device
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


def load_run(run: Path) -> dict[str, Any]:
    """The checkpoint of a PPO run directory, with a clear error when there is none."""
    path = run / CHECKPOINT_NAME
    if not run.is_dir():
        raise ValueError(f"run={run}: no such run directory")
    if not path.exists():
        raise ValueError(f"run={run}: no {CHECKPOINT_NAME} (has it trained for one update?)")
    checkpoint = load_checkpoint(path)
    agent = checkpoint["config"]["agent"]["name"]
    if agent != "ppo":
        raise ValueError(f"run={run} was trained by agent={agent}; rlmem.evaluate evaluates "
                         "agent=ppo runs")
    return checkpoint


def evaluate_run(cfg: EvaluateConfig) -> tuple[str, EvaluationResult]:
    """Evaluate ``cfg.run`` on ``cfg.env``; write the JSON (and GIFs); return the env's name."""
    check_evaluate_config(cfg)
    run = Path(cfg.run)
    checkpoint = load_run(run)
    trained_on = checkpoint["config"]["env"]
    name = short_name(transfer_target(trained_on) if cfg.env == TRANSFER else cfg.env)
    device = resolve_device(cfg.device)
    torch.set_num_threads(cfg.torch_threads)

    expected = checkpoint["observation"]
    probe = make_env(name, mission=expected["mission"])
    try:
        image_shape = list(probe.observation_space["image"].shape)
        num_actions = int(probe.action_space.n)
        observation_space = probe.observation_space
    finally:
        probe.close()
    if image_shape != expected["image"] or num_actions != checkpoint["num_actions"]:
        raise IncompatibleEnvError(
            f"env={name} observes images of shape {image_shape} with {num_actions} actions, but "
            f"the agent in {run} was trained on {trained_on} with images of shape "
            f"{expected['image']} and {checkpoint['num_actions']} actions")

    model = ActorCritic(observation_space, num_actions, checkpoint["config"]["memory"],
                        grid_encoding=recorded_grid_encoding(checkpoint["config"]))
    model.load_state_dict(checkpoint["model"])
    model.to(device).eval()

    num_envs = min(cfg.num_envs, cfg.episodes)
    quotas = episode_quotas(cfg.episodes, num_envs, first=cfg.gif)
    recorder: list[EpisodeRecorder] = []

    def make(index: int) -> Any:
        env = make_env(name, mission=expected["mission"])
        if index == 0 and cfg.gif:
            env = EpisodeRecorder(env, cfg.gif, tile_size=cfg.gif_tile_size)
            recorder.append(env)
        return env

    envs = make_vector_env(name, num_envs, env_fns=[lambda i=i: make(i)
                                                    for i in range(num_envs)])
    seed = int(np.random.SeedSequence([cfg.seed]).generate_state(1)[0])
    torch.manual_seed(seed)
    try:
        result, returns = evaluate_policy(model, envs, cfg.episodes, greedy=cfg.argmax,
                                          device=device, seed=seed, quotas=quotas)
    finally:
        envs.close()

    out_dir = run / "eval"
    out_dir.mkdir(parents=True, exist_ok=True)
    for index, frames in enumerate(recorder[0].recorded if recorder else []):
        write_gif(frames, out_dir / f"{name}_{index}.gif")
    report = {"env": name, "trained_on": trained_on, "frames": checkpoint["frames"],
              "argmax": cfg.argmax, "seed": cfg.seed, **result.as_dict(), "returns": returns}
    (out_dir / f"{name}.json").write_text(json.dumps(report, indent=2))
    return name, result


@hydra.main(config_path="conf", config_name="evaluate", version_base="1.3")
def main(cfg: Any) -> None:
    """Evaluate and print one summary line."""
    with reported_as_cli_errors("rlmem.evaluate"):
        typed: EvaluateConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
        name, result = evaluate_run(typed)
    print(f"{name}: {result.summary()}", flush=True)


if __name__ == "__main__":
    main()

"""Frames per second of our PPO's whole update (rollout, then the PPO update) for several
shapes of the work, taking turns update by update in one process, so that the load of a shared
machine hits every shape alike.

    python -m experiments.fast_trainer.speed --env DoorKey-5x5 --updates 4

compares the fast preset on the tensor envs with the minigrid preset on the gymnasium envs
(rlmem's defaults), lstm, one thread, and prints the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from omegaconf import OmegaConf
from torch import Tensor

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.presets import PRESETS, Preset, agent_values
from rlmem.agents.ppo.run_pieces import kernel_options
from rlmem.agents.ppo.tensor_collector import TensorRolloutCollector
from rlmem.agents.ppo.update import PPO
from rlmem.cells import cell_config
from rlmem.envs import EnvOptions
from rlmem.envs.backend import GYMNASIUM, TENSOR
from rlmem.envs.tensor import TensorVectorEnv


class ShapedUpdate:
    """One update (collect + PPO update) per call, of ``shape`` (``num_envs``,
    ``frames_per_env``, ``epochs``, ``batch_size``) over the minigrid preset's learning values,
    on the CPU, with the envs of ``backend`` (the gymnasium ones stepped in this process),
    from ``weights`` where given (a trained run's model); a call returns the frames it
    trained."""

    def __init__(self, env: str, memory: str, shape: Mapping[str, Any],
                 backend: str = TENSOR, hidden_size: int | None = None,
                 weights: Mapping[str, Tensor] | None = None) -> None:
        torch.manual_seed(0)
        values: dict[str, Any] = {**agent_values(Preset.minigrid), **shape}
        self.num_envs = int(values.pop("num_envs"))
        envs = EnvOptions().make_vector(env, self.num_envs, backend=backend, device="cpu")
        self.config = OmegaConf.structured(PPOConfig(**values))
        memory_config = OmegaConf.structured(cell_config(memory))
        if hidden_size is not None:
            memory_config.hidden_size = hidden_size
        model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                            memory_config, **kernel_options(self.config))
        if weights is not None:
            model.load_state_dict(weights)
        self.ppo = PPO(model, self.config)
        self.collector = (
            TensorRolloutCollector(envs, model, torch.device("cpu"), seed=0)
            if isinstance(envs, TensorVectorEnv)
            else RolloutCollector(envs, model, torch.device("cpu"), seed=0))

    def __call__(self) -> int:
        steps = int(self.config.frames_per_env)
        self.ppo.update(self.collector.collect(steps, self.config.recurrence))
        return self.num_envs * steps


def alternating_fps(env: str, memory: str, shapes: Mapping[str, Mapping[str, Any]],
                    updates: int, backends: Mapping[str, str] | None = None,
                    hidden_size: int | None = None,
                    weights: Mapping[str, Tensor] | None = None) -> dict[str, float]:
    """Each shape's frames/s over ``updates`` timed updates, the shapes taking turns (after
    one untimed warm-up update each); ``backends`` names a shape's envs (default: tensor),
    ``hidden_size`` the memory's (default: the cell's), ``weights`` the model's first
    weights (default: its initialisation)."""
    torch.set_num_threads(1)
    steps = {name: ShapedUpdate(env, memory, shape, (backends or {}).get(name, TENSOR),
                                hidden_size, weights)
             for name, shape in shapes.items()}
    for step in steps.values():
        step()
    frames = dict.fromkeys(steps, 0)
    seconds = dict.fromkeys(steps, 0.0)
    for _ in range(updates):
        for name, step in steps.items():
            start = time.perf_counter()
            frames[name] += step()
            seconds[name] += time.perf_counter() - start
    return {name: frames[name] / seconds[name] for name in steps}


SHAPE_KEYS = ("num_envs", "frames_per_env", "epochs", "batch_size")


def print_variants_table(rows: Iterable[tuple[str, Mapping[str, Any], str, str, int | None]],
                         variants: Mapping[str, Mapping[str, Any]], updates: int) -> None:
    """A markdown table of whole updates' frames/s: one line per row (its name, shape, env,
    cell and memory size: None, the cell's), the ``variants`` (agent values over the shape,
    by column name) taking turns (:func:`alternating_fps`), the last variant's ratio to the
    first, and the load average before and after the row."""
    names = list(variants)
    print(f"| shape (minibatch) | env | cell | "
          f"{' | '.join(f'{name} (frames/s)' for name in names)} | ratio | load before → after |")
    print(f"|---|---|---|{'---:|' * len(names)}---:|---|")
    for name, shape, env, memory, hidden_size in rows:
        before = os.getloadavg()[0]
        fps = alternating_fps(env, memory, {variant: {**shape, **values}
                                            for variant, values in variants.items()},
                              updates, hidden_size=hidden_size)
        print(f"| {name} ({shape['batch_size']}) | {env} | {memory} | "
              f"{' | '.join(f'{fps[variant]:.0f}' for variant in names)} | "
              f"{fps[names[-1]] / fps[names[0]]:.2f} | {before:.2f} → "
              f"{os.getloadavg()[0]:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="DoorKey-5x5")
    parser.add_argument("--memory", default="lstm")
    parser.add_argument("--updates", type=int, default=4)
    args = parser.parse_args()
    shapes = {f"{preset.name} preset": {key: getattr(PRESETS[preset], key) for key in SHAPE_KEYS}
              for preset in (Preset.minigrid, Preset.fast)}
    backends = {"minigrid preset": GYMNASIUM, "fast preset": TENSOR}
    before = os.getloadavg()[0]
    speeds = alternating_fps(args.env, args.memory, shapes, args.updates, backends)
    print(f"{args.env} {args.memory}, {args.updates} updates each in turn, load average "
          f"{before:.2f} before, {os.getloadavg()[0]:.2f} after:")
    for name, fps in speeds.items():
        print(f"  {name} ({backends[name]} envs): {fps:.0f} frames/s")
    print(f"  ratio: {speeds['fast preset'] / speeds['minigrid preset']:.2f}")


if __name__ == "__main__":
    main()

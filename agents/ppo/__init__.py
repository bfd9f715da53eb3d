"""Our recurrent PPO (``agent=ppo``), readable top to bottom:

- :mod:`~rlmem.agents.ppo.config`: the hyperparameters (torch-free, registered as ``ppo``);
- :mod:`~rlmem.agents.ppo.presets`: the values MiniGrid and other envs want different, chosen
  by the env's family and recorded in the run;
- :mod:`~rlmem.agents.ppo.model`: the actor-critic (field encoders, the memory cell, heads);
- :mod:`~rlmem.agents.ppo.critic_memory`: the state of a critic with a memory cell of its own;
- :mod:`~rlmem.agents.ppo.collector`: rollouts from vectorised envs, one batched step at a time;
- :mod:`~rlmem.agents.ppo.rollout`: a rollout and its BPTT chunks, in minibatches;
- :mod:`~rlmem.agents.ppo.gae`: advantages and returns;
- :mod:`~rlmem.agents.ppo.loss`: the clipped PPO objective;
- :mod:`~rlmem.agents.ppo.update`: one PPO update (the optimizer steps);
- :mod:`~rlmem.agents.ppo.train`: the training run; :mod:`~rlmem.agents.ppo.actor`: evaluation.

Importing the package registers the agent (:class:`PPOConfig`, its trainer and its actor
loader) and imports nothing else: the trainer and the actor import torch when first called.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymnasium import spaces

from rlmem.agents.ppo.config import PPOConfig
from rlmem.agents.registry import register_agent

if TYPE_CHECKING:
    import torch

    from rlmem.agents.ppo.actor import PPOActor
    from rlmem.agents.run_config import RunConfig
    from rlmem.runs import Checkpoint, RunSession

__all__ = ["PPOConfig"]


def train(config: RunConfig[PPOConfig], run: RunSession) -> None:
    """:func:`rlmem.agents.ppo.train.train`, imported (with torch) when a run trains."""
    from rlmem.agents.ppo.train import train

    train(config, run)


def load_actor(run: Path, checkpoint: Checkpoint, observation_space: spaces.Space[Any],
               action_space: spaces.Space[Any], device: torch.device,
               eval_memory: dict[str, Any]) -> PPOActor:
    """:func:`rlmem.agents.ppo.actor.load_actor`, imported (with torch) when a run plays."""
    from rlmem.agents.ppo.actor import load_actor

    return load_actor(run, checkpoint, observation_space, action_space, device, eval_memory)


register_agent("ppo", PPOConfig, train, load_actor)

"""A trained run of our PPO as the :class:`~rlmem.agents.policy_evaluation.Actor` that evaluation
plays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from rlmem.agents.policy_evaluation import weights_changed
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.observation import add_time, observation_to_tensors
from rlmem.cells import State
from rlmem.envs import Observation
from rlmem.runs import CHECKPOINT_NAME, Checkpoint
from rlmem.runs.restore import ON_EVALUATE, load_state, saved_state, state_mismatches


class PPOActor:
    """Our PPO's :class:`ActorCritic` as an :class:`~rlmem.agents.policy_evaluation.Actor`, one
    batched step at a time.

    Args:
        model: the actor-critic, on ``device``, in eval mode.
        device: where the model lives.
    """

    def __init__(self, model: ActorCritic, device: torch.device) -> None:
        self.model = model
        self.device = device

    def initial_state(self, num_envs: int) -> State:
        return self.model.initial_state(num_envs, device=self.device)

    @torch.no_grad()
    def act(self, observation: Observation, state: State, resets: np.ndarray,
            greedy: bool) -> tuple[np.ndarray, State]:
        inputs = add_time(observation_to_tensors(observation, self.device))
        out = self.model(inputs, state, torch.as_tensor(resets, device=self.device).unsqueeze(0))
        action, _ = out.head.sample(out.action_params[0], greedy=greedy)
        return out.head.env_action(action), out.state


def load_actor(run: Path, checkpoint: Checkpoint, observation_space: spaces.Space[Any],
               action_space: spaces.Space[Any], device: torch.device,
               eval_memory: dict[str, Any]) -> PPOActor:
    """The model of a run, rebuilt from its recorded config (with ``eval_memory`` over its
    memory) and weights, for an env of these spaces.

    Raises:
        ValueError: ``eval_memory`` changes the shapes of the weights.
        IncompatibleStateError: the weights do not fit the model of the run's own config
            (the file was altered, or another trainer wrote it).
    """
    config = checkpoint.config
    path = run / CHECKPOINT_NAME

    def build(memory: dict[str, Any]) -> ActorCritic:
        return ActorCritic(observation_space, action_space, memory,
                           grid_encoding=config["grid_encoding"],
                           discrete_encoding=config["discrete_encoding"],
                           shared_memory=bool(config["agent"]["shared_memory"]))

    model = build({**config["memory"], **eval_memory})
    weights = saved_state(checkpoint, "model", path, ON_EVALUATE)
    problems = state_mismatches(model, weights) if eval_memory else []
    # eval_memory is to blame only where the run's own memory takes the weights.
    if problems and not state_mismatches(build(dict(config["memory"])), weights):
        raise weights_changed(eval_memory, problems)
    load_state(model, checkpoint, "model", path, ON_EVALUATE)
    return PPOActor(model.to(device).eval(), device)

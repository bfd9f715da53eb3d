"""A trained RecurrentPPO as the :class:`~rlmem.agents.policy_evaluation.Actor` that evaluation
plays."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib import RecurrentPPO

from rlmem.agents.policy_evaluation import weights_changed
from rlmem.agents.sb3.train import build_model, make_envs, model_from_checkpoint
from rlmem.envs import Observation
from rlmem.runs import CHECKPOINT_NAME, Checkpoint
from rlmem.runs.restore import (
    ON_EVALUATE,
    IncompatibleStateError,
    saved_state,
    state_mismatches,
)

SB3State: TypeAlias = tuple[np.ndarray, ...] | None
"""``predict``'s memory: the actor's packed ``(h, c)`` arrays, or None before the first step
(zeros)."""


class SB3Actor:
    """RecurrentPPO's ``predict``, one batched step at a time.

    ``predict`` carries the memory as ``(h, c)`` arrays and zeroes it where ``episode_start``
    is set, which is a reset for an rlmem cell (its initial state is all zeros) and for
    sb3-contrib's own LSTM alike. It transposes image observations itself when the policy was
    trained channels-first.

    Args:
        model: the RecurrentPPO (e.g. from :func:`rlmem.agents.sb3.train.load_model`).
    """

    def __init__(self, model: RecurrentPPO) -> None:
        self.model = model

    def initial_state(self, num_envs: int) -> SB3State:
        return None  # predict starts from zeros

    def act(self, observation: Observation, state: SB3State, resets: np.ndarray,
            greedy: bool) -> tuple[np.ndarray, SB3State]:
        actions, state = self.model.predict(observation, state=state, episode_start=resets,
                                            deterministic=greedy)
        return np.asarray(actions), state


def load_actor(run: Path, checkpoint: Checkpoint, observation_space: spaces.Space[Any],
               action_space: spaces.Space[Any], device: torch.device,
               eval_memory: dict[str, Any]) -> SB3Actor:
    """The RecurrentPPO of an ``agent=sb3`` run (its own spaces: the evaluation env has been
    checked to have the same), its cell rebuilt with ``eval_memory`` over its memory.

    Raises:
        ValueError: ``eval_memory`` changes the shapes of the weights.
        IncompatibleStateError: the weights do not fit the policy of the run's own config.
    """
    path = run / CHECKPOINT_NAME
    config = checkpoint.config
    evaluated = dataclasses.replace(
        checkpoint, config={**config, "memory": {**config["memory"], **eval_memory}})
    try:
        model = model_from_checkpoint(evaluated, device=device, path=path)
    except IncompatibleStateError:
        if eval_memory:  # only now worth building the policies again to say who is at fault
            _blame_eval_memory(checkpoint, eval_memory, path)
        raise
    model.policy.set_training_mode(False)
    return SB3Actor(model)


def _blame_eval_memory(checkpoint: Checkpoint, eval_memory: dict[str, Any], path: Path) -> None:
    """Raise :func:`~rlmem.agents.policy_evaluation.weights_changed` where the policy built
    with ``eval_memory`` does not fit the run's weights and the run's own policy does; return
    otherwise (the run itself is at fault, as the error of loading it says)."""
    config = checkpoint.config
    weights = saved_state(checkpoint, "policy", path, ON_EVALUATE)
    env = make_envs(config, 1, config["seed"])
    try:
        def problems(memory: dict[str, Any]) -> list[str]:
            policy = build_model({**config, "memory": memory}, env).policy
            return state_mismatches(policy, weights)

        found = problems({**config["memory"], **eval_memory})
        if found and not problems(dict(config["memory"])):
            raise weights_changed(eval_memory, found)
    finally:
        env.close()

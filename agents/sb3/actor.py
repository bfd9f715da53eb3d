"""A trained RecurrentPPO as the :class:`~rlmem.agents.policy_evaluation.Actor` that evaluation
plays."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib import RecurrentPPO

from rlmem.agents.sb3.train import model_from_checkpoint
from rlmem.envs import Observation
from rlmem.runs import CHECKPOINT_NAME, Checkpoint

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
    checked to have the same).

    Raises:
        ValueError: ``eval_memory`` is given (the sb3 policy rebuilds its cell as trained).
    """
    if eval_memory:
        raise ValueError("eval_memory applies to agent=ppo runs; this is an agent=sb3 run")
    model = model_from_checkpoint(checkpoint, device=device, path=run / CHECKPOINT_NAME)
    model.policy.set_training_mode(False)
    return SB3Actor(model)

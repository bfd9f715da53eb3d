"""A trained RecurrentPPO as the :class:`~rlmem.agents.evaluation.Actor` that evaluation plays."""

from __future__ import annotations

from typing import Any

import numpy as np
from sb3_contrib import RecurrentPPO


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

    def initial_state(self, num_envs: int) -> Any:
        return None  # predict starts from zeros

    def act(self, observation: dict[str, np.ndarray], state: Any, resets: np.ndarray,
            greedy: bool) -> tuple[np.ndarray, Any]:
        actions, state = self.model.predict(observation, state=state, episode_start=resets,
                                            deterministic=greedy)
        return np.asarray(actions), state

"""``EnvOutputCallback``: what the envs return, checked before RecurrentPPO acts on it or learns
from it (:class:`~rlmem.agents.env_output.EnvOutputCheck`), as our PPO's collector does."""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

from rlmem.agents.env_output import EnvOutputCheck


class EnvOutputCallback(BaseCallback):
    """Raise :class:`~rlmem.agents.env_output.EnvOutputError`, naming the env and the frame,
    when a step's observations or rewards are not finite: the observation a rollout starts
    from (before the policy reads it) and every step's (before they reach the buffer's
    update).

    Args:
        name: the env as the run names it, for the messages.
    """

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def _init_callback(self) -> None:
        self.check = EnvOutputCheck(self.name, self.model.observation_space, self.model.n_envs,
                                    "Nothing of it was used for an update.")

    def _on_rollout_start(self) -> None:
        # The reset's observation on the first rollout; the last step's afterwards.
        observation = self.model._last_obs
        if isinstance(observation, (np.ndarray, dict)):  # None before any reset; no tuples
            self.check.check(observation, None, f"frame {self.num_timesteps}")

    def _on_step(self) -> bool:
        self.check.check(self.locals["new_obs"], self.locals["rewards"],
                         f"frame {self.num_timesteps}")
        return True

"""The PPO hyperparameters both trainers share, with one set of names, defaults and checks.

``agent=ppo`` (:class:`rlmem.agents.ppo.PPOConfig`) and ``agent=sb3``
(:class:`rlmem.agents.sb3.config.SB3Config`) extend :class:`PPOHyperparameters`, so one
experiment runs through either trainer with the same keys. This module imports neither torch nor
stable-baselines3: composing a config needs neither.
"""

from __future__ import annotations

from dataclasses import dataclass

from rlmem.agents.base import AgentConfig


@dataclass
class PPOHyperparameters(AgentConfig):
    """PPO's hyperparameters; defaults follow rl-starter-files' MiniGrid recipe. Each is checked
    here, when the config is built (types are checked by the schema). ``normalize_advantage``
    and ``entropy_coef`` are each trainer's own: our PPO's are decided by its presets
    (:mod:`rlmem.agents.ppo.presets`)."""

    frames_per_env: int | None = None
    """Rollout length: frames collected from each env per update (RecurrentPPO's n_steps).
    null: the trainer's (agent=sb3: 128; our PPO: its preset's)."""
    epochs: int | None = None
    """Passes over each rollout. null: the trainer's (agent=sb3: 4; our PPO: its preset's)."""
    batch_size: int | None = None
    """Frames per minibatch. null: the trainer's (agent=sb3: 256; our PPO: its preset's). Our
    PPO refuses more than its rollout's ``num_envs × frames_per_env`` frames."""
    lr: float = 1e-3
    """Adam learning rate."""
    adam_eps: float = 1e-8
    """Adam epsilon."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE λ."""
    clip: float = 0.2
    """PPO ratio clip ε, also the value clip range when clip_value is true."""
    value_coef: float = 0.5
    """Weight of the value loss."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    clip_value: bool = True
    """Clip the value update around the rollout's values, as rl-starter-files does."""

    def __post_init__(self) -> None:
        """Raise a :class:`ValueError` naming the key when a value is out of range."""
        for key in ("frames_per_env", "epochs", "batch_size"):
            if getattr(self, key) is not None and getattr(self, key) <= 0:
                raise ValueError(f"agent.{key} must be positive, got {getattr(self, key)}")
        for key in ("lr", "adam_eps", "clip", "max_grad_norm"):
            if not getattr(self, key) > 0:
                raise ValueError(f"agent.{key} must be positive, got {getattr(self, key)}")
        if self.value_coef < 0:
            raise ValueError(f"agent.value_coef must be non-negative, got {self.value_coef}")
        for key in ("gamma", "gae_lambda"):
            if not 0 <= getattr(self, key) <= 1:
                raise ValueError(f"agent.{key} must be in [0, 1], got {getattr(self, key)}")

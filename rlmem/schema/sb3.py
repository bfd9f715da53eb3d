"""Typed config of ``agent=sb3``: sb3-contrib's RecurrentPPO with a :class:`MemoryPolicy`.

Keys shared with our PPO (``rlmem.agents.ppo.PPOConfig``) have the same names and meaning, so
one experiment runs through either trainer. RecurrentPPO has no ``recurrence``: it
backpropagates through whole sequences (episodes cut at minibatch boundaries). This module does
not import stable-baselines3, so composing a config never needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class SB3Config:
    """Hyperparameters of ``agent=sb3``; defaults follow ``agent=ppo`` (rl-starter-files)."""

    name: str = "sb3"
    """Trainer name (``agent=sb3``)."""
    frames_per_env: int = 128
    """Rollout length: frames collected from each env per update (RecurrentPPO's n_steps)."""
    epochs: int = 4
    """Passes over each rollout (n_epochs)."""
    batch_size: int = 256
    """Frames per minibatch; its sequences are padded to the longest one."""
    lr: float = 1e-3
    """Adam learning rate."""
    adam_eps: float = 1e-8
    """Adam epsilon."""
    gamma: float = 0.99
    """Discount."""
    gae_lambda: float = 0.95
    """GAE λ."""
    clip: float = 0.2
    """PPO ratio clip ε (clip_range), also the value clip range when clip_value is true."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (ent_coef)."""
    value_coef: float = 0.5
    """Weight of the value loss (vf_coef)."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    clip_value: bool = True
    """Clip the value prediction around the rollout's values (clip_range_vf = clip)."""
    normalize_advantage: bool = False
    """Standardise advantages within each minibatch."""
    head_size: int = 64
    """Hidden units of the actor and critic MLPs on top of the memory (net_arch)."""
    shared_lstm: bool = False
    """The critic reads the actor's memory output, detached (sb3-contrib's shared_lstm)."""
    enable_critic_lstm: bool = True
    """The critic has its own memory cell (sb3-contrib's default); false with shared_lstm
    false gives a feed-forward critic."""
    ortho_init: bool = True
    """SB3's orthogonal initialisation of the extractor and heads (never of the cell)."""
    target_kl: float | None = None
    """Stop an update's epochs early when the approximate KL exceeds 1.5 × this; null: never."""


def check_sb3_config(config: Any) -> None:
    """Raise a :class:`ValueError` naming the key when a value is out of range or two values
    conflict (types are checked by the schema)."""
    for key in ("frames_per_env", "epochs", "head_size"):
        if config[key] <= 0:
            raise ValueError(f"agent.{key} must be positive, got {config[key]}")
    if config.batch_size <= 1:
        # RecurrentPPO standardises advantages with a std over the minibatch.
        raise ValueError(f"agent.batch_size must be at least 2, got {config.batch_size}")
    for key in ("lr", "adam_eps", "clip", "max_grad_norm"):
        if not config[key] > 0:
            raise ValueError(f"agent.{key} must be positive, got {config[key]}")
    for key in ("entropy_coef", "value_coef"):
        if config[key] < 0:
            raise ValueError(f"agent.{key} must be non-negative, got {config[key]}")
    for key in ("gamma", "gae_lambda"):
        if not 0 <= config[key] <= 1:
            raise ValueError(f"agent.{key} must be in [0, 1], got {config[key]}")
    if config.target_kl is not None and not config.target_kl > 0:
        raise ValueError(f"agent.target_kl must be positive or null, got {config.target_kl}")
    if config.shared_lstm and config.enable_critic_lstm:
        raise ValueError("agent.shared_lstm=true needs agent.enable_critic_lstm=false: the "
                         "critic either shares the actor's memory, has its own, or has none")

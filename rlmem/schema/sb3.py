"""Typed config of ``agent=sb3``: sb3-contrib's RecurrentPPO with a :class:`MemoryPolicy`.

Keys shared with our PPO (``rlmem.agents.ppo.PPOConfig``) have the same names and meaning, so
one experiment runs through either trainer. RecurrentPPO has no ``recurrence``: it
backpropagates through whole sequences (episodes cut at minibatch boundaries). This module does
not import stable-baselines3, so composing a config never needs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlmem.agents.ppo_hyperparameters import PPOHyperparameters, check_ppo_hyperparameters

SB3_POLICIES = ("memory", "sb3_lstm")
"""The policies ``agent=sb3`` can train; see :attr:`SB3Config.policy`."""


@dataclass
class SB3Config(PPOHyperparameters):
    """Hyperparameters of ``agent=sb3``: the shared ones (with RecurrentPPO's names n_steps,
    n_epochs, clip_range, ent_coef and vf_coef; its minibatch sequences are padded to the
    longest one), plus the policy's options."""

    name: str = "sb3"
    """Trainer name (``agent=sb3``)."""
    policy: str = "memory"
    """memory: rlmem's MemoryPolicy with the configured cell; sb3_lstm: sb3-contrib's own
    MultiInputLstmPolicy (an nn.LSTM of memory.hidden_size, torch's init), needs memory=lstm
    and serves as the outside reference."""
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
    check_ppo_hyperparameters(config)
    if config.policy not in SB3_POLICIES:
        raise ValueError(f"agent.policy={config.policy!r}; use one of {', '.join(SB3_POLICIES)}")
    if config.head_size <= 0:
        raise ValueError(f"agent.head_size must be positive, got {config.head_size}")
    if config.batch_size <= 1:
        # RecurrentPPO standardises advantages with a std over the minibatch.
        raise ValueError(f"agent.batch_size must be at least 2, got {config.batch_size}")
    if config.target_kl is not None and not config.target_kl > 0:
        raise ValueError(f"agent.target_kl must be positive or null, got {config.target_kl}")
    if config.shared_lstm and config.enable_critic_lstm:
        raise ValueError("agent.shared_lstm=true needs agent.enable_critic_lstm=false: the "
                         "critic either shares the actor's memory, has its own, or has none")

"""The config of ``agent=sb3``: sb3-contrib's RecurrentPPO with a :class:`MemoryPolicy`.

Keys shared with our PPO (:class:`rlmem.agents.ppo.PPOConfig`) have the same names and meaning,
so one experiment runs through either trainer. RecurrentPPO has no ``recurrence``: it
backpropagates through whole sequences (episodes cut at minibatch boundaries). This module does
not import stable-baselines3 or torch, so composing a config never needs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from gymnasium import spaces

from rlmem.agents.base import EnvProbe
from rlmem.agents.ppo.hyperparameters import PPOHyperparameters

if TYPE_CHECKING:
    from rlmem.agents.run_config import RunConfig

SB3_OBSERVATIONS = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
"""The observation spaces SB3's own features extractors take (besides MiniGrid's dict)."""

SB3_ACTIONS = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
"""The action spaces SB3's policies act in."""


class SB3Policy(Enum):
    """The policies ``agent=sb3`` can train."""

    memory = "memory"
    """rlmem's MemoryPolicy with the configured cell."""
    sb3_lstm = "sb3_lstm"
    """sb3-contrib's own MultiInputLstmPolicy (an nn.LSTM of memory.hidden_size, torch's init):
    needs memory=lstm, and serves as the outside reference."""


@dataclass
class SB3Config(PPOHyperparameters):
    """Hyperparameters of ``agent=sb3``: the shared ones (with RecurrentPPO's names n_steps,
    n_epochs, clip_range, ent_coef and vf_coef; its minibatch sequences are padded to the
    longest one), plus the policy's options."""

    name: str = "sb3"
    """Trainer name (``agent=sb3``)."""
    frames_per_env: int = 128
    """Rollout length: frames collected from each env per update (RecurrentPPO's n_steps)."""
    epochs: int = 4
    """Passes over each rollout (RecurrentPPO's n_epochs)."""
    batch_size: int = 256
    """Frames per minibatch."""
    policy: SB3Policy = SB3Policy.memory
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
    normalize_advantage: bool = False
    """Standardise advantages within each minibatch (RecurrentPPO's normalize_advantage); false
    as rl-starter-files' MiniGrid recipe."""
    entropy_coef: float = 0.01
    """Weight of the entropy bonus (RecurrentPPO's ent_coef); 0.01 as rl-starter-files'
    MiniGrid recipe."""

    def __post_init__(self) -> None:
        """Raise a :class:`ValueError` naming the key when a value is out of range or two values
        conflict."""
        super().__post_init__()
        if self.entropy_coef < 0:
            raise ValueError(f"agent.entropy_coef must be non-negative, got {self.entropy_coef}")
        if self.head_size <= 0:
            raise ValueError(f"agent.head_size must be positive, got {self.head_size}")
        if self.batch_size <= 1:
            # RecurrentPPO standardises advantages with a std over the minibatch.
            raise ValueError(f"agent.batch_size must be at least 2, got {self.batch_size}")
        if self.target_kl is not None and not self.target_kl > 0:
            raise ValueError(f"agent.target_kl must be positive or null, got {self.target_kl}")
        if self.shared_lstm and self.enable_critic_lstm:
            raise ValueError("agent.shared_lstm=true needs agent.enable_critic_lstm=false: the "
                             "critic either shares the actor's memory, has its own, or has none")

    def check_run(self, config: RunConfig[Any], env: EnvProbe) -> None:
        """On MiniGrid the features extractor is :class:`~rlmem.agents.sb3.MiniGridExtractor`,
        for MiniGrid envs made by name alone; elsewhere SB3's own, for the observation and
        action spaces SB3 supports (a dict observation only as MiniGrid's)."""
        if env.minigrid:
            if config.env_kwargs or config.wrappers:
                raise ValueError(
                    f"agent=sb3 trains MiniGrid envs made by name alone (its features "
                    f"extractor is MiniGridExtractor); env={env.name} with env_kwargs/wrappers: "
                    "use agent=ppo")
            return
        observation, action = env.observation_space, env.action_space
        if not isinstance(observation, SB3_OBSERVATIONS) or not isinstance(action, SB3_ACTIONS):
            raise ValueError(
                f"agent=sb3 trains envs whose observations are a Box, Discrete, MultiDiscrete or "
                f"MultiBinary space (or MiniGrid's) and whose actions SB3 supports; env={env.name} "
                f"has observations {observation} and actions {action}: use agent=ppo")

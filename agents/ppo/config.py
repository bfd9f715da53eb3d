"""The config of our PPO (``agent=ppo``): torch-free; its defaults are written only here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rlmem.agents.base import ActorLoader, EnvProbe, Trainer
from rlmem.agents.ppo.hyperparameters import PPOHyperparameters
from rlmem.agents.registry import register_agent


@register_agent("ppo")
@dataclass
class PPOConfig(PPOHyperparameters):
    """Hyperparameters of our PPO (``agent=ppo``): the shared ones, plus the BPTT chunk."""

    name: str = "ppo"
    """Trainer name (``agent=ppo``)."""
    recurrence: int = 16
    """Steps of backpropagation through time: the chunk length (``batch_size / recurrence``
    chunks per minibatch)."""

    supports_stop_return: ClassVar[bool] = True

    def __post_init__(self) -> None:
        """Raise a :class:`ValueError` naming the key when a value is out of range."""
        super().__post_init__()
        if self.recurrence <= 0:
            raise ValueError(f"agent.recurrence must be positive, got {self.recurrence}")
        if self.frames_per_env % self.recurrence:
            raise ValueError(f"agent.frames_per_env={self.frames_per_env} must be a multiple "
                             f"of agent.recurrence={self.recurrence}")
        if self.batch_size % self.recurrence:
            raise ValueError(f"agent.batch_size={self.batch_size} must be a multiple of "
                             f"agent.recurrence={self.recurrence}")

    @classmethod
    def trainer(cls) -> Trainer:
        from rlmem.agents.ppo.train import train  # torch only when this agent trains

        return train

    @classmethod
    def actor_loader(cls) -> ActorLoader:
        from rlmem.agents.ppo.actor import load_actor

        return load_actor

    def check_run(self, config: Mapping[str, Any], env: EnvProbe) -> None:
        """The model must encode every observation field and have a head for the actions."""
        from rlmem.agents.ppo.model import check_spaces

        try:
            check_spaces(env.observation_space, env.action_space, config["grid_encoding"],
                         config["discrete_encoding"])
        except ValueError as error:
            raise ValueError(f"env={env.name}: {error}") from None

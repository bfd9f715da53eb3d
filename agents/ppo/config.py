"""The config of our PPO (``agent=ppo``): torch-free; its defaults are written only here and in
its presets (:mod:`rlmem.agents.ppo.presets`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from rlmem.agents.base import ActorLoader, EnvProbe, Trainer
from rlmem.agents.ppo.hyperparameters import PPOHyperparameters
from rlmem.agents.ppo.presets import PRESETS, Preset, decide_presets
from rlmem.agents.registry import register_agent


@register_agent("ppo")
@dataclass
class PPOConfig(PPOHyperparameters):
    """Hyperparameters of our PPO (``agent=ppo``): the shared ones, the BPTT chunk, the critic's
    memory and the reward scale.

    The keys from ``normalize_advantage`` to ``reward_scale`` default to null: the run's preset
    (``preset``, chosen from the env's family unless set) decides each one when the config is
    built, and the run records the values (:func:`rlmem.agents.ppo.presets.decide_presets`).
    A value given on the command line wins over the preset's. The two presets:

    ===================  ========  =======  ====================================================
    key                  minigrid  generic  why
    ===================  ========  =======  ====================================================
    normalize_advantage  false     true     see the key
    shared_memory        true      true     see the key
    recurrence           16        16       see the key
    reward_scale         1         1        see the key
    ===================  ========  =======  ====================================================
    """

    name: str = "ppo"
    """Trainer name (``agent=ppo``)."""
    preset: Preset | None = None
    """Whose values the keys below take where they are null: minigrid (rl-starter-files'
    MiniGrid recipe, rlmem's defaults before presets) or generic (measured on POPGym's Easy
    envs against sb3-contrib's RecurrentPPO, issue 30). null: minigrid for MiniGrid and BabyAI
    envs, generic for every other env (:func:`rlmem.envs.family.env_family`). The run records
    the preset it took."""
    normalize_advantage: bool | None = None
    """Standardise advantages within each minibatch. null: the preset's. minigrid: false, as
    rl-starter-files (MiniGrid's sparse reward of up to 1 gives advantages of order 0.1-1, so
    they weigh enough against the 0.01 entropy bonus). generic: true, as sb3-contrib: where
    rewards are small (POPGym pays ±1/48 a step, so advantages are ~0.05) the entropy bonus
    otherwise outweighs the policy gradient and keeps the policy near uniform."""
    shared_memory: bool | None = None
    """The actor and the critic read one memory cell (rl-starter-files); false gives the critic
    a cell of its own, of the same config (sb3-contrib's enable_critic_lstm), so the value loss
    never shapes the actor's memory. null: the preset's (true for both; see the table)."""
    recurrence: int | None = None
    """Steps of backpropagation through time: the chunk length (``batch_size / recurrence``
    chunks per minibatch). null: the preset's (16 for both, rl-starter-files' value; see the
    table)."""
    reward_scale: float | None = None
    """Factor on the rewards the update learns from (advantages, returns, values); the logged
    returns stay the env's. null: the preset's (1 for both; see the table)."""

    supports_stop_return: ClassVar[bool] = True

    def __post_init__(self) -> None:
        """Raise a :class:`ValueError` naming the key when a value is out of range. A
        ``recurrence`` left null is checked against the preset's (every preset's while the
        preset is null too), so a batch no preset can cut into chunks fails here."""
        super().__post_init__()
        if self.recurrence is not None and self.recurrence <= 0:
            raise ValueError(f"agent.recurrence must be positive, got {self.recurrence}")
        if self.reward_scale is not None and not self.reward_scale > 0:
            raise ValueError(f"agent.reward_scale must be positive, got {self.reward_scale}")
        presets = list(PRESETS) if self.preset is None else [self.preset]
        for recurrence, whose in (
                [(self.recurrence, "")] if self.recurrence is not None else
                [(PRESETS[preset].recurrence, f" (the {preset.name} preset's)")
                 for preset in presets]):
            if self.frames_per_env % recurrence:
                raise ValueError(f"agent.frames_per_env={self.frames_per_env} must be a "
                                 f"multiple of agent.recurrence={recurrence}{whose}")
            if self.batch_size % recurrence:
                raise ValueError(f"agent.batch_size={self.batch_size} must be a multiple of "
                                 f"agent.recurrence={recurrence}{whose}")

    @property
    def chunk_length(self) -> int:
        """``recurrence`` as the run decided it (a run trains its decided config,
        :func:`rlmem.agents.train_config.agent_config`).

        Raises:
            ValueError: ``recurrence`` is still null (the config was not decided).
        """
        if self.recurrence is None:
            raise ValueError("agent.recurrence is null: decide the config's presets first "
                             "(rlmem.agents.train_config.recorded_config)")
        return self.recurrence

    @classmethod
    def decided(cls, agent: Mapping[str, Any], config: Mapping[str, Any],
                recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The preset and the keys it decides (:func:`~rlmem.agents.ppo.presets.decide_presets`
        for the run's env)."""
        return decide_presets(agent, config["env"], recorded)

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

"""The agent contract: what ``python -m rlmem.train agent=<name>`` and ``rlmem.evaluate`` need
of an agent.

An agent is one package under ``agents/`` (``rlmem.agents.<name>``) whose ``__init__`` imports
its config: a dataclass subclassing :class:`AgentConfig`, registered with
:func:`rlmem.agents.registry.register_agent`. The config is torch-free, so composing a run's
config imports no model code; it checks its own values in ``__post_init__`` (OmegaConf's
``to_object`` runs it, so a bad value fails before any work), and it says which envs it can
train on (:meth:`AgentConfig.check_run`). The registry pairs the config with
how the agent trains (a :data:`Trainer`) and how a trained run plays (an :data:`ActorLoader`):
the modules behind those two are imported only when they are called, so our PPO never imports
sb3-contrib.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from gymnasium import spaces
from omegaconf import MISSING

if TYPE_CHECKING:
    import torch

    from rlmem.agents.policy_evaluation import Actor
    from rlmem.agents.run_config import RunConfig
    from rlmem.runs import Checkpoint, RunSession

Trainer = Callable[["RunConfig[Any]", "RunSession"], None]
"""``train(config, run)``: the run's :class:`~rlmem.agents.run_config.RunConfig` (its agent
this agent's config) and the opened run (:func:`rlmem.runs.open_run`), which has not reached
its frames."""

ActorLoader = Callable[
    [Path, "Checkpoint", spaces.Space[Any], spaces.Space[Any], "torch.device", dict[str, Any]],
    "Actor[Any]"]
"""``load(run_dir, checkpoint, observation_space, action_space, device, eval_memory)``: the
trained agent of a run, for an env of these spaces, as an
:class:`~rlmem.agents.policy_evaluation.Actor`. The checkpoint's config has its derived values
decided (:func:`~rlmem.agents.derived.with_derived_values`). The actor's memory is its own
business (evaluation hands it back unread), hence ``Any``."""


@dataclass(frozen=True)
class EnvProbe:
    """A run's env, as one env made with the run's options shows it."""

    name: str
    """The env as the run names it."""
    observation_space: spaces.Space[Any]
    action_space: spaces.Space[Any]
    minigrid: bool
    """The observations are MiniGrid's encoding (:class:`rlmem.envs.MiniGridObservation`)."""
    episode_limit: int | None
    """The most steps an episode lasts, None when unlimited
    (:func:`rlmem.envs.factory.episode_limit`)."""


@dataclass
class AgentConfig:
    """The config of a registered agent (``agent=<name>``): its defaults are this dataclass's,
    stored by :func:`rlmem.schema.train.register_train_configs`."""

    name: str = MISSING
    """The agent's registered name (``agent=<name>``)."""

    supports_stop_return: ClassVar[bool] = False
    """The trainer honours the run's ``stop_return``."""

    @classmethod
    def decided(cls, agent: Mapping[str, Any], config: Mapping[str, Any],
                recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The ``agent`` section of the run's ``config`` with every value it leaves to be
        derived decided (our PPO's presets); ``recorded`` is the agent section of the
        checkpoint the run resumes, if any, whose decisions a resumed run keeps. A recorded
        section has nothing left to decide, so this is idempotent. By default: as it is."""
        return dict(agent)

    @classmethod
    def memory_size(cls, agent: Mapping[str, Any]) -> int | None:
        """The memory's size (``memory.hidden_size``) where the run leaves it null, for the
        decided ``agent`` section; None: the cells' default
        (:data:`rlmem.cells.registry.DEFAULT_HIDDEN_SIZE`). By default: None."""
        return None

    @classmethod
    def decided_num_envs(cls, agent: Mapping[str, Any]) -> int | None:
        """The run's envs where ``num_envs`` is null, for the decided ``agent`` section; None:
        :data:`rlmem.agents.derived.DEFAULT_NUM_ENVS`. By default: None."""
        return None

    def check_run(self, config: RunConfig[Any], env: EnvProbe) -> None:
        """Raise a :class:`ValueError` naming the env when this agent cannot train the run
        ``config`` on ``env``; by default every env fits."""

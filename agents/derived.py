"""The values an RL run's config leaves to be derived, decided once, and the typed
:class:`~rlmem.agents.run_config.RunConfig` of a config so decided.

What the command line leaves null or ``auto`` is decided by :func:`with_derived_values` and
recorded in the run's ``config.yaml`` and checkpoint; evaluation and resuming read it from
there, so deciding a recorded config again changes nothing. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import OmegaConf

from rlmem.agents.base import AgentConfig
from rlmem.agents.registry import AGENTS
from rlmem.agents.run_config import RunConfig
from rlmem.envs import resolve_backend, resolve_vectorization, resolved_mission
from rlmem.envs.backend import AUTO, GYMNASIUM


def with_derived_values(config: Mapping[str, Any],
                        recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A run's config (resolved, or as a checkpoint recorded it) with every derived value
    decided: a null ``mission`` becomes whether the env's mission varies, ``vectorization=auto``
    sync or async by the machine's cores, ``env_backend=auto`` tensor or gymnasium by the env
    (gymnasium where ``vectorization`` is set, which only gymnasium's envs have), or as
    ``recorded`` decided it (absent, as in runs before the key: gymnasium). A run records what
    was decided, so this is idempotent: reading a recorded config decides nothing anew.

    The agent decides what its section leaves null
    (:meth:`~rlmem.agents.base.AgentConfig.decided`: our PPO's presets), keeping the decisions
    of ``recorded``, the config of the checkpoint a run resumes."""
    derived = dict(config)
    derived["mission"] = resolved_mission(derived)
    # Runs before this key stepped gymnasium envs; auto keeps a resumed run's backend, and
    # takes gymnasium's envs where the run asks how they step (vectorization sync or async).
    backend = derived.get("env_backend", GYMNASIUM)
    if backend == AUTO and recorded is not None:
        backend = recorded.get("env_backend", GYMNASIUM)
    if backend == AUTO and derived.get("vectorization", AUTO) != AUTO:
        backend = GYMNASIUM
    derived["env_backend"] = resolve_backend(
        backend, str(derived["env"]), wrappers=derived.get("wrappers") or (),
        env_kwargs=derived.get("env_kwargs") or {})
    derived = with_decided_agent(derived, recorded)
    # By the cores of the machine that starts the run (runs before this key stepped in sync).
    derived["vectorization"] = resolve_vectorization(derived.get("vectorization", "sync"),
                                                     int(derived["num_envs"]))
    return derived


def with_decided_agent(config: Mapping[str, Any],
                       recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config`` with what the agent decides decided: the values its section leaves null
    (:meth:`~rlmem.agents.base.AgentConfig.decided`, from the run's env), then a null
    ``memory.hidden_size`` (:func:`decided_memory_size`) and a null or absent ``num_envs``
    (:func:`decided_num_envs`); all keep the decisions of ``recorded``. Run names call this
    too, with the run's env, agent and memory alone, to know the size and the envs a run would
    take (:func:`rlmem.schema.train.train_run_name`)."""
    derived = dict(config)
    agent = derived.get("agent")
    if isinstance(agent, Mapping) and agent.get("name") in AGENTS:
        earlier = recorded.get("agent") if recorded is not None else None
        derived["agent"] = AGENTS[agent["name"]].config.decided(
            agent, derived, earlier if isinstance(earlier, Mapping) else None)
    memory = derived.get("memory")
    if isinstance(memory, Mapping) and memory.get("hidden_size") is None:
        derived["memory"] = {**memory, "hidden_size": decided_memory_size(derived, recorded)}
    if derived.get("num_envs") is None:
        derived["num_envs"] = decided_num_envs(derived, recorded)
    return derived


DEFAULT_NUM_ENVS = 16
"""The envs of a run whose ``num_envs`` is null and whose agent decides none
(:meth:`~rlmem.agents.base.AgentConfig.decided_num_envs`): rlmem's default before the presets
decided it."""


def decided_num_envs(config: Mapping[str, Any],
                     recorded: Mapping[str, Any] | None = None) -> int:
    """The envs of a run that leaves ``num_envs`` null (``rlmem.train``'s default): the resumed
    checkpoint's, else the agent's for its decided section (our PPO's preset), else
    :data:`DEFAULT_NUM_ENVS`."""
    if recorded is not None and recorded.get("num_envs") is not None:
        return int(recorded["num_envs"])
    agent = config.get("agent")
    envs = (AGENTS[agent["name"]].config.decided_num_envs(agent)
            if isinstance(agent, Mapping) and agent.get("name") in AGENTS else None)
    return DEFAULT_NUM_ENVS if envs is None else envs


def decided_memory_size(config: Mapping[str, Any],
                        recorded: Mapping[str, Any] | None = None) -> int:
    """The size of a memory left null (``memory.hidden_size=null``, ``rlmem.train``'s
    default): the resumed checkpoint's, else the agent's for its decided section
    (:meth:`~rlmem.agents.base.AgentConfig.memory_size`: our PPO's preset), else the cells'
    default."""
    from rlmem.cells.registry import DEFAULT_HIDDEN_SIZE  # torch: not while composing

    earlier = recorded.get("memory") if recorded is not None else None
    if isinstance(earlier, Mapping) and earlier.get("hidden_size") is not None:
        return int(earlier["hidden_size"])
    agent = config.get("agent")
    size = (AGENTS[agent["name"]].config.memory_size(agent)
            if isinstance(agent, Mapping) and agent.get("name") in AGENTS else None)
    return DEFAULT_HIDDEN_SIZE if size is None else size


def agent_config(agent: Mapping[str, Any]) -> AgentConfig:
    """The typed config of a run's decided ``agent`` section, checked as it is built.

    Raises:
        ValueError: a value is out of range (naming the key).
    """
    schema = OmegaConf.structured(AGENTS[str(agent["name"])].config)
    typed = OmegaConf.to_object(OmegaConf.merge(schema, dict(agent)))
    assert isinstance(typed, AgentConfig)
    return typed


def run_config(config: Mapping[str, Any]) -> RunConfig[AgentConfig]:
    """The typed :class:`~rlmem.agents.run_config.RunConfig` of a decided ``config`` (one
    :func:`with_derived_values` returned, or a checkpoint's), its agent section checked as it
    is built (:func:`agent_config`).

    Raises:
        ValueError: a decided value of the agent is out of range (naming the key).
        TypeError: ``config`` lacks a key of a run's config or has one it does not know.
    """
    return RunConfig(**{**config, "memory": dict(config["memory"]),
                        "agent": agent_config(config["agent"])})

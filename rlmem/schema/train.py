"""Typed config of ``python -m rlmem.train``: the run's keys and the ``agent`` group.

``rlmem/conf/train.yaml`` starts from ``train_schema``
(:class:`~rlmem.agents.train_config.TrainConfig`); ``agent=<name>`` selects the config
dataclass of a registered agent (:data:`rlmem.agents.registry.AGENTS`), stored as
``agent/<name>``, and ``memory=<cell>`` the typed config of any registered cell
(:mod:`rlmem.schema.memory`). Every default is written once, in its dataclass: there is no
YAML to keep equal to it. A misspelt key or a value of the wrong type fails when Hydra composes
the config; a value out of range when the config is built (:func:`check_train_config`), before
any env or model is built.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from rlmem.agents.base import AgentConfig, EnvProbe
from rlmem.agents.registry import AGENTS
from rlmem.agents.train_config import TrainConfig, recorded_config, with_decided_agent
from rlmem.envs import EnvOptions, IncompatibleEnvError, interface_mismatch
from rlmem.schema.known_keys import check_known_keys
from rlmem.schema.memory import CONF_DIR, check_memory_config, register_memory_configs
from rlmem.schema.run_names import (
    RunNaming,
    cell_defaults,
    flatten,
    folder_settings,
    label_and_differences,
    labelled,
    schema_defaults,
)
from rlmem.schema.runs_root import register_runs_root

__all__ = ["TrainConfig", "check_envs", "check_train_config", "register_train_configs"]

RUN_NAME = "train_run_name"
"""The resolver of the default run directory: ``${runs_root:runs}/${train_run_name:}``, or
``${train_run_name:<label>}`` where a recipe labels its runs."""

NAMING = RunNaming(
    keys=("env_kwargs", "wrappers", "memory", "agent", "num_envs", "mission", "direction",
          "grid_encoding", "discrete_encoding", "flush_denormal", "stop_return"),
    in_path=frozenset({"memory.name", "agent.name"}))
"""What tells two RL runs of one env and seed apart: every key a checkpoint must share to be
resumed (``rlmem.agents.run.RESUME_SECTIONS`` but ``env`` and ``seed``, which are folders of
the path) and ``stop_return``."""


def _decided_size(root: DictConfig) -> int | None:
    """The memory size a run of ``root``'s env and agent takes when ``memory.hidden_size`` is
    null (:func:`~rlmem.agents.train_config.with_decided_agent`, given the run's env and agent
    alone: the rest of ``root`` resolves through this run name); None for an env or agent that
    the run's checks will refuse."""
    if str(root.agent.name) not in AGENTS:
        return None
    agent = OmegaConf.to_container(root.agent, resolve=True, enum_to_str=True)
    try:
        decided = with_decided_agent({"env": str(root.env), "agent": agent,
                                      "memory": {"hidden_size": None}})
    except KeyError:  # an unknown env, reported by the run's own checks
        return None
    return int(decided["memory"]["hidden_size"])


@functools.cache
def _file_defaults() -> Mapping[str, Any]:
    """The memory keys ``train.yaml`` sets over the cell's defaults (``memory.hidden_size:
    null``, for the agent to decide): a run that keeps them is named as one that sets nothing.
    Read once: the file ships with the package."""
    loaded = OmegaConf.load(CONF_DIR / "train.yaml")
    assert isinstance(loaded, DictConfig)
    memory = OmegaConf.to_container(loaded.get("memory", {}), resolve=False)
    return MappingProxyType(flatten(memory, "memory") if isinstance(memory, dict) and memory
                            else {})


def train_run_name(label: str | None = None, *, _root_: DictConfig) -> str:
    """``<agent>/<env>/<label>[+<key>-<value>...]/seed<seed>``: the default run directory
    below the runs root (:mod:`rlmem.schema.run_names`)."""
    agent = str(_root_.agent.name)
    defaults = {**schema_defaults(TrainConfig), **cell_defaults(_root_), **_file_defaults()}
    if agent in AGENTS:
        defaults.update(schema_defaults(AGENTS[agent], "agent."))
    name, shown = label_and_differences(_root_, NAMING, defaults, label or None)
    if "memory.hidden_size" in shown and shown["memory.hidden_size"] == _decided_size(_root_):
        del shown["memory.hidden_size"]  # the size the run would take anyway: the default run
    return f"{agent}/{_root_.env}/{labelled(name, folder_settings(shown))}/seed{_root_.seed}"


def register_train_configs() -> None:
    """Store ``train_schema``, ``agent/<name>`` and ``memory/<cell>``, and register the
    ``runs_root`` and ``train_run_name`` resolvers of the default ``run_dir`` (idempotent)."""
    register_memory_configs()
    register_runs_root()
    if not OmegaConf.has_resolver(RUN_NAME):
        OmegaConf.register_new_resolver(RUN_NAME, train_run_name)
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for name, schema in AGENTS.items():
        store.store(group="agent", name=name, node=schema)


def check_train_config(cfg: DictConfig) -> TrainConfig:
    """The composed ``cfg`` as a :class:`TrainConfig`, after checking it: every config
    dataclass checks its own values as it is built (the run's, the agent's), the cell is built
on the ``meta`` device (:func:`~rlmem.schema.memory.check_memory_config`), then one env (and
    one transfer env) is made to check that the agent can train on it, before any run directory
    is touched.

    Raises:
        UnknownKeyError: a key no schema knows, added with ``+``
            (:func:`~rlmem.schema.known_keys.check_known_keys`).
        ValueError: naming the key or the env (:class:`KeyError` for an unknown env name,
            :class:`IncompatibleEnvError` for a transfer env of other spaces).
    """
    check_known_keys(cfg, "rlmem.train")
    typed = OmegaConf.to_object(cfg)
    assert isinstance(typed, TrainConfig)
    recorded = recorded_config(cfg)
    check_memory_config(recorded["memory"])  # its size decided (rlmem.train leaves it null)
    check_envs(recorded, typed.agent)
    return typed


def check_envs(config: Mapping[str, Any], agent: AgentConfig) -> None:
    """Make the run's env (and its ``transfer_env``) once, with the run's recorded ``config``,
    and check that ``agent`` can train on it (:meth:`~rlmem.agents.base.AgentConfig.check_run`)
    and that a transfer env has the same spaces.

    Raises:
        ValueError: naming the env and what is wrong (:class:`IncompatibleEnvError` for a
            transfer env with other spaces).
    """
    options = EnvOptions.from_config(config)
    env, transfer_env = config["env"], config["transfer_env"]
    trained = EnvProbe(env, *options.probe(env))
    agent.check_run(config, trained)
    if transfer_env is not None:
        transfer = EnvProbe(transfer_env, *options.probe(transfer_env))
        mismatch = interface_mismatch(transfer.observation_space, transfer.action_space,
                                      trained.observation_space, trained.action_space)
        if mismatch:
            raise IncompatibleEnvError(
                f"transfer_env={transfer_env} {mismatch} (those of env={env}): an agent "
                "trained on env cannot act in it")

"""Typed config of ``python -m rlmem.train``: the run's keys and the ``agent`` group, and the
one function that turns a composed command line into the run's config (:func:`resolve`).

``rlmem/conf/train.yaml`` starts from ``train_schema`` (:class:`TrainConfig`);
``agent=<name>`` selects the config dataclass of a registered agent
(:data:`rlmem.agents.registry.AGENTS`), stored as ``agent/<name>``, and ``memory=<cell>`` the
typed config of any registered cell (:mod:`rlmem.schema.memory`). Every default is written
once, in its dataclass: there is no YAML to keep equal to it. A misspelt key or a value of the
wrong type fails when Hydra composes the config; a value out of range in :func:`resolve`,
before any run directory is touched. :func:`resolve` is called once per run: its
:class:`~rlmem.agents.run_config.RunConfig` is what the checks, the trainer, the checkpoint
and ``config.yaml`` all read.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from rlmem.agents.base import AgentConfig, EnvProbe
from rlmem.agents.derived import run_config, with_decided_agent, with_derived_values
from rlmem.agents.encoding_names import DISCRETE_ENCODINGS, GRID_ENCODINGS
from rlmem.agents.registry import AGENTS
from rlmem.agents.run import env_options
from rlmem.agents.run_config import RunConfig
from rlmem.envs import (
    AUTO,
    BACKENDS,
    VECTORIZATIONS,
    IncompatibleEnvError,
    env_spec,
    interface_mismatch,
    parse_wrappers,
)
from rlmem.runs import resolved_config
from rlmem.schema.known_keys import check_known_keys
from rlmem.schema.memory import CONF_DIR, check_memory_config, register_memory_configs
from rlmem.schema.ranges import check_seed, check_torch_threads
from rlmem.schema.run_folder import RunFolderConfig
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

__all__ = ["TrainConfig", "check_envs", "register_train_configs", "resolve"]


@dataclass
class TrainConfig(RunFolderConfig):
    """``python -m rlmem.train env=DoorKey-5x5 memory=relstm``.

    The run folder's keys (``run_dir``, ``resume``, ``force``) come from
    :class:`~rlmem.schema.run_folder.RunFolderConfig`, which the training commands share."""

    env: str = "DoorKey-5x5"
    """Short env name (DoorKey-5x5, MemoryS7, ...; see rlmem.envs.ENVS), any registered
    gymnasium id (CartPole-v1, MiniGrid-Empty-8x8-v0), or module:EnvId (imports module first)."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of gymnasium.make, e.g. +env_kwargs.max_steps=100; the transfer and
    evaluation envs get them too."""
    wrappers: list[Any] = field(default_factory=list)
    """Gymnasium wrappers applied in order after gymnasium.make: import paths
    ("gymnasium.wrappers:TimeLimit", "my_module:MyWrapper") or {target: <path>, kwargs: {...}};
    the transfer and evaluation envs get them too. MiniGrid's observation encoding comes after
    them."""
    transfer_env: str | None = None
    """The env rlmem.evaluate env=transfer plays: any env with the same observation and action
    spaces. null: the paired target of a short name (DoorKey-5x5 -> DoorKey-16x16)."""
    memory: Any = MISSING
    """The memory cell and its hyperparameters (any registered cell,
    :mod:`rlmem.schema.memory`), e.g. ``memory=relstm``."""
    agent: Any = MISSING
    """The trainer and its hyperparameters (``agent=<name>``): ``ppo`` (ours) or ``sb3``."""
    seed: int = 0
    """Seeds the weights, the action sampling and the envs."""
    frames: int = 300_000
    """Total env frames (over all envs); a resumed run continues up to this number."""
    stop_return: float | None = None
    """Stop early once the mean return of the last 1000 episodes reaches this; null trains all
    ``frames`` (agent=ppo only)."""
    device: str = "auto"
    """auto, cpu, cuda or cuda:N."""
    num_envs: int | None = None
    """Parallel envs. null: the agent's (agent=ppo: its preset's, 16 but for agent.preset=fast's
    256; agent=sb3: 16). The run records what was decided."""
    vectorization: str = "auto"
    """How gymnasium's envs step (setting it asks for them under env_backend=auto): sync (all in
    this process; the reference, reproduced bit for bit),
    async (agent=ppo: in worker processes, one group of envs stepping while the policy acts for
    the other, so every core is used; agent=sb3: SubprocVecEnv), or auto: async on at least 4
    usable cores with at least 8 envs, else sync (rlmem.envs.vectorization). The run records
    what was chosen."""
    env_backend: str = "auto"
    """Which envs step the run: gymnasium (any env, one Python object per copy), tensor (the
    batched torch envs of rlmem.envs.tensor: MiniGrid's DoorKey, Memory, Fetch, GoToObject,
    GoToDoor and RedBlueDoors, the POPGym suite's envs; steps on the run's device) or auto
    (tensor where the env has a tensor version and its wrappers and env_kwargs allow it, else
    gymnasium; learning on both was measured the same over 5 test seeds,
    experiments/tensor_backend/RESULTS.md). The run records what was chosen and resumes with it
    (auto keeps a resumed run's backend; runs without the key resume as gymnasium). auto takes
    gymnasium's envs where vectorization is set (sync or async: how those envs step), so
    vectorization=sync stays the bit-exact reference. rlmem.evaluate plays the gymnasium envs,
    which the tensor envs equal."""
    mission: bool | None = None
    """Encode the mission text; null does so when the env's mission varies between episodes.
    The run records what was decided (true or false)."""
    direction: bool = False
    """Add MiniGrid's compass heading (one-hot of 4) to what enters the memory; the paper's
    rl-starter-files recipe leaves it out. MiniGrid envs only."""
    grid_encoding: str = "embedding"
    """How MiniGrid's grid indices enter the conv net: embedding, onehot or raw (the paper's
    rl-starter-files recipe); see rlmem.agents.minigrid_encoders.ImageEncoder."""
    discrete_encoding: str = "onehot"
    """How Discrete and MultiDiscrete observations are encoded: onehot or embedding; see
    rlmem.agents.ppo.space_encoders.DiscreteEncoder."""
    torch_threads: int = 1
    """torch intra-op threads; 1 is fastest for the small batched ops of a rollout."""
    flush_denormal: bool = False
    """Compute on the CPU with subnormal floats flushed to zero (torch.set_flush_denormal),
    which most x86 CPUs are many times slower at; a memory that decays towards zero over a long
    episode can be full of them (docs/performance.md#subnormal-floats). Recorded: a run resumes
    and is evaluated only with the value it started with. false: IEEE arithmetic, PyTorch's
    default. Not used by a CUDA device's arithmetic."""
    trust_run_config: bool = False
    """On resume, import the modules the checkpoint's config names (module:EnvId, wrappers
    outside gymnasium and minigrid) even where this command does not name them itself. A run
    directory is data: without this, such a checkpoint is refused before anything is
    imported."""
    progress_bar: bool = True
    """Show a tqdm progress bar."""

    def __post_init__(self) -> None:
        """Raise a :class:`ValueError`/:class:`KeyError` naming the key when a value is invalid
        (types are checked by the schema; the envs themselves by
        :func:`rlmem.schema.train.check_envs`)."""
        env_spec(self.env)
        if self.transfer_env is not None:
            env_spec(self.transfer_env)
        for key in ("frames", "num_envs"):
            if getattr(self, key) is not None and getattr(self, key) <= 0:
                raise ValueError(f"{key} must be positive, got {getattr(self, key)}")
        check_seed(self.seed)
        check_torch_threads(self.torch_threads)
        if (self.stop_return is not None and isinstance(self.agent, AgentConfig)
                and not self.agent.supports_stop_return):
            able = ", ".join(f"agent={name}" for name, agent in AGENTS.items()
                             if agent.config.supports_stop_return)
            raise ValueError(f"stop_return is supported by {able} only, not "
                             f"agent={self.agent.name}")
        for key, valid in (("grid_encoding", GRID_ENCODINGS),
                           ("discrete_encoding", DISCRETE_ENCODINGS),
                           ("vectorization", (*VECTORIZATIONS, AUTO)),
                           ("env_backend", BACKENDS)):
            if getattr(self, key) not in valid:
                raise ValueError(f"{key}={getattr(self, key)!r}; use one of {', '.join(valid)}")
        for spec in parse_wrappers(self.wrappers):
            spec.resolve()


RUN_NAME = "train_run_name"
"""The resolver of the default run directory: ``${runs_root:runs}/${train_run_name:}``, or
``${train_run_name:<label>}`` where a recipe labels its runs."""

NAMING = RunNaming(
    keys=("env_kwargs", "wrappers", "memory", "agent", "num_envs", "env_backend", "mission",
          "direction",
          "grid_encoding", "discrete_encoding", "flush_denormal", "stop_return"),
    in_path=frozenset({"memory.name", "agent.name"}))
"""What tells two RL runs of one env and seed apart: every key a checkpoint must share to be
resumed (:data:`rlmem.agents.run.RESUME_SECTIONS` but ``env`` and ``seed``, which are folders of
the path) and ``stop_return``."""


def _decided_defaults(root: DictConfig) -> dict[str, int]:
    """The memory size and the envs a run of ``root``'s env and agent takes when
    ``memory.hidden_size`` and ``num_envs`` are null, by their run-name keys
    (:func:`~rlmem.agents.derived.with_decided_agent`, given the run's env and agent alone:
    the rest of ``root`` resolves through this run name); none for an env or agent that the
    run's checks will refuse."""
    if str(root.agent.name) not in AGENTS:
        return {}
    agent = OmegaConf.to_container(root.agent, resolve=True, enum_to_str=True)
    try:
        decided = with_decided_agent({"env": str(root.env), "agent": agent,
                                      "memory": {"hidden_size": None}, "num_envs": None})
    except KeyError:  # an unknown env, reported by the run's own checks
        return {}
    return {"memory.hidden_size": int(decided["memory"]["hidden_size"]),
            "num_envs": int(decided["num_envs"])}


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
        defaults.update(schema_defaults(AGENTS[agent].config, "agent."))
    name, shown = label_and_differences(_root_, NAMING, defaults, label or None)
    for key, value in _decided_defaults(_root_).items():
        if key in shown and shown[key] == value:
            del shown[key]  # the value the run would take anyway: the default run
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
    for name, agent in AGENTS.items():
        store.store(group="agent", name=name, node=agent.config)


def resolve(cfg: DictConfig, resumed: Mapping[str, Any] | None = None
            ) -> RunConfig[AgentConfig]:
    """The run's config: the composed ``cfg`` checked, resolved, its derived values decided
    (keeping those of ``resumed``, the config of the checkpoint the run resumes,
    :func:`~rlmem.agents.derived.with_derived_values`), typed and checked again as decided.
    Every config dataclass checks its own values as it is built (the run's, the agent's), the
    cell is built on the ``meta`` device (:func:`~rlmem.schema.memory.check_memory_config`),
    then one env (and one transfer env) is made to check that the agent can train on it
    (:func:`check_envs`), all before any run directory is touched.

    Raises:
        UnknownKeyError: a key no schema knows, added with ``+``
            (:func:`~rlmem.schema.known_keys.check_known_keys`).
        ValueError: naming the key or the env (:class:`KeyError` for an unknown env name,
            :class:`IncompatibleEnvError` for a transfer env of other spaces).
    """
    check_known_keys(cfg, "rlmem.train")
    typed = OmegaConf.to_object(cfg)  # every config dataclass checks its values as composed
    assert isinstance(typed, TrainConfig)
    config = run_config(with_derived_values(resolved_config(cfg), resumed))
    check_memory_config(config.memory)  # its size decided (rlmem.train leaves it null)
    check_envs(config)
    return config


def check_envs(config: RunConfig[AgentConfig]) -> None:
    """Make the run's env (and its ``transfer_env``) once, with the run's options, and check
    that its agent can train on it (:meth:`~rlmem.agents.base.AgentConfig.check_run`) and that
    a transfer env has the same spaces.

    Raises:
        ValueError: naming the env and what is wrong (:class:`IncompatibleEnvError` for a
            transfer env with other spaces).
    """
    options = env_options(config)
    env, transfer_env = config.env, config.transfer_env
    trained = EnvProbe(env, *options.probe(env))
    config.agent.check_run(config, trained)
    if transfer_env is not None:
        transfer = EnvProbe(transfer_env, *options.probe(transfer_env))
        mismatch = interface_mismatch(transfer.observation_space, transfer.action_space,
                                      trained.observation_space, trained.action_space)
        if mismatch:
            raise IncompatibleEnvError(
                f"transfer_env={transfer_env} {mismatch} (those of env={env}): an agent "
                "trained on env cannot act in it")

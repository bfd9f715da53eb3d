"""The config of an RL run (``python -m rlmem.train``), whichever agent trains it, and the values
it derives.

:class:`TrainConfig` checks its own values when it is built (OmegaConf's ``to_object``, which
also builds and so checks the agent's config). What the config leaves to be derived is decided
once, by :func:`with_derived_values`, and recorded in the run's ``config.yaml`` and checkpoint;
evaluation and resuming read it from there. Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf

from rlmem.agents.base import AgentConfig
from rlmem.agents.encoding_names import DISCRETE_ENCODINGS, GRID_ENCODINGS
from rlmem.agents.registry import AGENTS
from rlmem.envs import (
    AUTO,
    VECTORIZATIONS,
    env_spec,
    parse_wrappers,
    resolve_vectorization,
    resolved_mission,
)
from rlmem.runs import resolved_config
from rlmem.schema.ranges import check_seed, check_torch_threads


@dataclass
class TrainConfig:
    """``python -m rlmem.train env=DoorKey-5x5 memory=relstm``."""

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
    num_envs: int = 16
    """Parallel envs."""
    vectorization: str = "auto"
    """How the envs step: sync (all in this process; the reference, reproduced bit for bit),
    async (agent=ppo: in worker processes, one group of envs stepping while the policy acts for
    the other, so every core is used; agent=sb3: SubprocVecEnv), or auto: async on at least 4
    usable cores with at least 8 envs, else sync (rlmem.envs.vectorization). The run records
    what was chosen."""
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
    run_dir: str = MISSING
    """The run directory. Default: runs/<agent>/<env>/<cell>/seed<seed>, with the settings that
    differ from the defaults after the cell (runs/ppo/DoorKey-5x5/relstm+grid_encoding-raw/seed0)
    or a recipe's name in its place, so that runs of other settings never share a folder
    (rlmem/schema/run_names.py)."""
    resume: bool = True
    """Continue from the run directory's checkpoint when there is one; false starts afresh,
    after moving the earlier run's files into <run_dir>/previous/<time>/ (nothing is
    deleted)."""
    force: bool = False
    """Use run_dir even though it is a non-empty folder that rlmem did not make (its files of
    the names a run writes are replaced). Without it such a folder is refused."""
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
            if getattr(self, key) <= 0:
                raise ValueError(f"{key} must be positive, got {getattr(self, key)}")
        check_seed(self.seed)
        check_torch_threads(self.torch_threads)
        if (self.stop_return is not None and isinstance(self.agent, AgentConfig)
                and not self.agent.supports_stop_return):
            able = ", ".join(f"agent={name}" for name, config in AGENTS.items()
                             if config.supports_stop_return)
            raise ValueError(f"stop_return is supported by {able} only, not "
                             f"agent={self.agent.name}")
        for key, valid in (("grid_encoding", GRID_ENCODINGS),
                           ("discrete_encoding", DISCRETE_ENCODINGS),
                           ("vectorization", (*VECTORIZATIONS, AUTO))):
            if getattr(self, key) not in valid:
                raise ValueError(f"{key}={getattr(self, key)!r}; use one of {', '.join(valid)}")
        for spec in parse_wrappers(self.wrappers):
            spec.resolve()


def with_derived_values(config: Mapping[str, Any],
                        recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A run's config (resolved, or as a checkpoint recorded it) with every derived value
    decided: a null ``mission`` becomes whether the env's mission varies, ``vectorization=auto``
    sync or async by the machine's cores. A run records what
    was decided, so this is idempotent: reading a recorded config decides nothing anew.

    The agent decides what its section leaves null
    (:meth:`~rlmem.agents.base.AgentConfig.decided`: our PPO's presets), keeping the decisions
    of ``recorded``, the config of the checkpoint a run resumes."""
    derived = dict(config)
    derived["mission"] = resolved_mission(derived)
    # By the cores of the machine that starts the run (runs before this key stepped in sync).
    derived["vectorization"] = resolve_vectorization(derived.get("vectorization", "sync"),
                                                     int(derived.get("num_envs", 1)))
    return with_decided_agent(derived, recorded)


def with_decided_agent(config: Mapping[str, Any],
                       recorded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``config`` with what the agent decides decided: the values its section leaves null
    (:meth:`~rlmem.agents.base.AgentConfig.decided`, from the run's env), then a null
    ``memory.hidden_size`` (:func:`decided_memory_size`); both keep the decisions of
    ``recorded``. Run names call this too, with the run's env, agent and memory alone, to know
    the size a run would take (:func:`rlmem.schema.train.train_run_name`)."""
    derived = dict(config)
    agent = derived.get("agent")
    if isinstance(agent, Mapping) and agent.get("name") in AGENTS:
        earlier = recorded.get("agent") if recorded is not None else None
        derived["agent"] = AGENTS[agent["name"]].decided(
            agent, derived, earlier if isinstance(earlier, Mapping) else None)
    memory = derived.get("memory")
    if isinstance(memory, Mapping) and memory.get("hidden_size") is None:
        derived["memory"] = {**memory, "hidden_size": decided_memory_size(derived, recorded)}
    return derived


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
    size = (AGENTS[agent["name"]].memory_size(agent)
            if isinstance(agent, Mapping) and agent.get("name") in AGENTS else None)
    return DEFAULT_HIDDEN_SIZE if size is None else size


def agent_config(agent: Mapping[str, Any]) -> AgentConfig:
    """The typed config of a run's decided ``agent`` section, checked as it is built.

    Raises:
        ValueError: a value is out of range (naming the key).
    """
    schema = OmegaConf.structured(AGENTS[str(agent["name"])])
    typed = OmegaConf.to_object(OmegaConf.merge(schema, dict(agent)))
    assert isinstance(typed, AgentConfig)
    return typed


def recorded_config(cfg: DictConfig, recorded: Mapping[str, Any] | None = None
                    ) -> dict[str, Any]:
    """What a run records of its composed config ``cfg``: resolved, enum members as their
    names, derived values decided (:func:`with_derived_values`, keeping those of
    ``recorded``, the config of the checkpoint the run resumes), the decided agent section
    checked (:func:`agent_config`).

    Raises:
        ValueError: a decided value of the agent is out of range (naming the key).
    """
    config = with_derived_values(resolved_config(cfg), recorded)
    agent_config(config["agent"])
    return config

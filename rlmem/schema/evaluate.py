"""Typed config of ``python -m rlmem.evaluate run=<run dir> env=transfer``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from rlmem.schema.ranges import check_seed, check_torch_threads

TRANSFER = "transfer"
"""The ``env`` value that means the training env's paired transfer target."""


@dataclass
class EvaluateConfig:
    """``python -m rlmem.evaluate run=runs/ppo/DoorKey-5x5/relstm/seed0 env=transfer``."""

    run: str = MISSING
    """The run directory of a trained agent (holds checkpoint.pt)."""
    env: str | None = None
    """Env to evaluate on: a short name, a full gymnasium id, or transfer (the run's
    transfer_env, else the paired target of its env). null: transfer where the run has a
    transfer target, else the env it was trained on. The env is built with the run's
    env_kwargs and wrappers."""
    episodes: int = 100
    """Number of evaluation episodes."""
    argmax: bool = False
    """Act greedily (most likely action) instead of sampling from the policy."""
    gif: int = 0
    """Save this many episodes as GIFs in <run>/eval/ (envs other than MiniGrid are made with
    render_mode=rgb_array for that)."""
    gif_tile_size: int = 16
    """Pixels per grid cell in the GIFs (MiniGrid)."""
    num_envs: int = 16
    """Envs played in parallel (each contributes a fixed share of the episodes, unless
    first_to_end)."""
    first_to_end: bool = False
    """Count the first ``episodes`` episodes to end over all envs (and every episode that
    ends at the step that reaches that many), as rl-starter-files' scripts/evaluate.py and so
    the ReLSTM authors count them, instead of a fixed share per env. Short episodes then
    weigh more: on DoorKey-16x16 a failure lasts all 2560 steps, so an env whose episodes
    end sooner adds more of the counted ones. Recorded in the result's file name
    (``_first-to-end``)."""
    seed: int = 0
    """Seeds the envs and the action sampling (distinct from any training env seed)."""
    device: str = "auto"
    """auto, cpu, cuda or cuda:N."""
    torch_threads: int = 1
    """torch intra-op threads."""
    eval_memory: dict[str, Any] = field(default_factory=dict)
    """Memory hyperparameters overridden for this evaluation, which must not change the
    weights. Where the env's episodes outlast a cell's
    :attr:`~rlmem.cells.base.Cell.episode_bound`, it is raised to their step limit, said and
    recorded in the result's file name (MemLSTM trained with ``capacity=256`` attends over all
    2560 steps of a DoorKey-16x16 episode, as the paper evaluates it); a value given here wins,
    e.g. ``+eval_memory.capacity=256`` for the training window."""
    progress_bar: bool = True
    """Show a tqdm progress bar over the episodes."""
    trust_run_config: bool = False
    """Import the modules the run's config names (an env given as module:EnvId, wrappers
    outside gymnasium and minigrid). A run directory is data: without this, such a run is
    refused before anything is imported. Set it only for runs whose author you trust."""


def register_evaluate_configs() -> None:
    """Store ``evaluate_schema`` (idempotent)."""
    ConfigStore.instance().store(name="evaluate_schema", node=EvaluateConfig)


def check_evaluate_config(cfg: EvaluateConfig) -> None:
    """Raise a :class:`ValueError` naming the key when a value is out of range."""
    for key in ("episodes", "num_envs", "gif_tile_size"):
        if getattr(cfg, key) <= 0:
            raise ValueError(f"{key} must be positive, got {getattr(cfg, key)}")
    check_seed(cfg.seed)
    check_torch_threads(cfg.torch_threads)
    if cfg.gif and cfg.first_to_end:
        raise ValueError("gif records the first env's share of the episodes, which "
                         "first_to_end=true does not give it; evaluate the GIFs on their own")
    if not 0 <= cfg.gif <= cfg.episodes:
        raise ValueError(f"gif must be between 0 and episodes={cfg.episodes}, got {cfg.gif}")

"""Make single and vectorised MiniGrid envs with rlmem's observation encoding."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv

from rlmem.envs.encoding import MiniGridObservation, mission_varies
from rlmem.envs.registry import env_spec

VECTORIZATIONS: dict[str, type[VectorEnv]] = {"sync": SyncVectorEnv, "async": AsyncVectorEnv}
"""``sync`` steps the envs in this process (fastest for cheap envs such as MiniGrid on few
cores); ``async`` gives each env its own process."""


def make_env(name: str, *, mission: bool | None = None, **kwargs: Any) -> gym.Env:
    """One env by short name or full id, wrapped in :class:`MiniGridObservation`.

    Args:
        name: a short name (``DoorKey-5x5``) or a registered gymnasium id.
        mission: include the tokenised mission; ``None`` does so when the env's mission varies.
        kwargs: passed to :func:`gymnasium.make` (``render_mode``, ``max_steps``, ...).
    """
    env = gym.make(env_spec(name).id, **kwargs)
    return MiniGridObservation(env, mission_varies(env) if mission is None else mission)


def uses_mission(name: str) -> bool:
    """Whether ``name``'s mission varies between episodes, i.e. is worth encoding."""
    env = gym.make(env_spec(name).id)
    try:
        return mission_varies(env)
    finally:
        env.close()


def resolved_mission(config: Mapping[str, Any]) -> bool:
    """Whether a run's config encodes the mission: its ``mission`` key, or, where that is null
    (as in runs that recorded the key unresolved), whether its env's mission varies."""
    mission = config.get("mission")
    return uses_mission(config["env"]) if mission is None else bool(mission)


def make_vector_env(name: str, num_envs: int, *, mission: bool | None = None,
                    vectorization: str = "sync",
                    env_fns: list[Callable[[], gym.Env]] | None = None) -> VectorEnv:
    """``num_envs`` copies of an env, auto-reset in the same step.

    With ``SAME_STEP`` autoreset, a step that ends an episode returns the first observation of
    the next one and puts the last observation of the finished one in ``info["final_obs"]``:
    the layout PPO wants (the terminal observation is needed only to bootstrap a truncation).

    Args:
        name: a short name or a registered gymnasium id.
        num_envs: number of envs.
        mission: as in :func:`make_env`; resolved once so that all copies agree.
        vectorization: a key of :data:`VECTORIZATIONS`.
        env_fns: replace the env constructors (tests use this for special envs).
    """
    if vectorization not in VECTORIZATIONS:
        raise ValueError(f"vectorization={vectorization!r}; use one of "
                         f"{', '.join(VECTORIZATIONS)}")
    if num_envs <= 0:
        raise ValueError(f"num_envs must be positive, got {num_envs}")
    if env_fns is None:
        with_mission = uses_mission(name) if mission is None else mission
        env_fns = [lambda: make_env(name, mission=with_mission) for _ in range(num_envs)]
    return VECTORIZATIONS[vectorization](env_fns, autoreset_mode=AutoresetMode.SAME_STEP)

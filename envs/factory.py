"""Make single and vectorised envs: any registered gymnasium env, with the run's ``env_kwargs``
and ``wrappers``, and MiniGrid's observation encoding for MiniGrid envs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import torch
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from minigrid.minigrid_env import MiniGridEnv

from rlmem.envs.backend import GYMNASIUM, TENSOR, resolve_backend
from rlmem.envs.minigrid_observation import MiniGridObservation, is_minigrid, mission_varies
from rlmem.envs.minigrid_view import use_direct_view
from rlmem.envs.registry import env_spec
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv
from rlmem.envs.tensor.popgym.wrappers import apply_tensor_wrappers
from rlmem.envs.tensor.registry import make_tensor_env
from rlmem.envs.wrappers import WrapperItem, WrapperSpec, apply_wrappers, parse_wrappers

VECTORIZATIONS: dict[str, type[SyncVectorEnv] | type[AsyncVectorEnv]] = {
    "sync": SyncVectorEnv, "async": AsyncVectorEnv}
"""``sync`` steps the envs in this process; ``async`` gives each env its own process (gymnasium's
vector envs). A run of our PPO with ``vectorization=async`` steps its envs in
:class:`rlmem.envs.env_workers.EnvWorkers` instead, which overlap with the policy
(:mod:`rlmem.envs.vectorization`)."""


def make_env(name: str, *, mission: bool | None = None, direction: bool = False,
             wrappers: Iterable[WrapperItem] = (), **kwargs: Any) -> gym.Env:
    """One env by short name, full gymnasium id or ``module:EnvId``.

    The env is made by :func:`gymnasium.make` with ``kwargs``, wrapped by ``wrappers`` in order
    (the first innermost), and then, if it still observes MiniGrid's Dict, by
    :class:`MiniGridObservation`. Any other env keeps its own observations. A MiniGrid env makes
    its view with :func:`~rlmem.envs.minigrid_view.use_direct_view` (the same arrays as
    MiniGrid's own, several times faster).

    Args:
        name: a short name (``DoorKey-5x5``) or a registered gymnasium id (``CartPole-v1``).
        mission: include the tokenised mission (MiniGrid only); ``None`` does so when the env's
            mission varies.
        direction: include the agent's compass heading (MiniGrid only).
        wrappers: import paths ``module:Name`` or ``{target, kwargs}`` mappings
            (:func:`rlmem.envs.wrappers.parse_wrappers`).
        kwargs: passed to :func:`gymnasium.make` (``render_mode``, ``max_steps``, ...).

    Raises:
        ValueError: ``mission=True`` or ``direction=True`` for an env that is not MiniGrid.
    """
    env = apply_wrappers(gym.make(env_spec(name).id, **kwargs), wrappers)
    if isinstance(env.unwrapped, MiniGridEnv):
        use_direct_view(env.unwrapped)
    if is_minigrid(env):
        return MiniGridObservation(env, mission_varies(env) if mission is None else mission,
                                   direction)
    for key, wanted in (("mission", mission), ("direction", direction)):
        if wanted:
            env.close()
            raise ValueError(f"{key}=true encodes a MiniGrid observation's {key}, but {name} "
                             "is not a MiniGrid env (or a wrapper replaced its observation)")
    return env


def uses_mission(name: str) -> bool:
    """Whether ``name``'s mission varies between episodes, i.e. is worth encoding (False for
    envs other than MiniGrid)."""
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
                    direction: bool = False, vectorization: str = "sync",
                    env_fns: list[Callable[[], gym.Env]] | None = None,
                    wrappers: Iterable[WrapperItem] = (),
                    env_kwargs: Mapping[str, Any] | None = None, backend: str = GYMNASIUM,
                    device: torch.device | str = "cpu") -> VectorEnv:
    """``num_envs`` copies of an env, auto-reset in the same step.

    With ``SAME_STEP`` autoreset, a step that ends an episode returns the first observation of
    the next one and puts the last observation of the finished one in ``info["final_obs"]``:
    the layout PPO wants (the terminal observation is needed only to bootstrap a truncation).

    Args:
        name: a short name or a registered gymnasium id.
        num_envs: number of envs.
        mission: as in :func:`make_env`; resolved once so that all copies agree.
        direction: as in :func:`make_env`.
        vectorization: a key of :data:`VECTORIZATIONS` (the gymnasium backend's).
        env_fns: replace the env constructors (tests use this for special envs; the gymnasium
            backend only).
        wrappers: as in :func:`make_env`.
        env_kwargs: passed to :func:`gymnasium.make`.
        backend: ``gymnasium``, ``tensor`` or ``auto`` (:mod:`rlmem.envs.backend`); the tensor
            backend returns a :class:`rlmem.envs.tensor.TensorVectorEnv`, whose observations,
            rewards and ends are tensors on ``device``.
        device: where a tensor env lives (the gymnasium backend's envs are on the CPU).

    Raises:
        ValueError: an unknown ``vectorization`` or ``backend``, no envs, or a ``tensor``
            backend the env cannot have (:func:`rlmem.envs.backend.resolve_backend`).
    """
    if vectorization not in VECTORIZATIONS:
        raise ValueError(f"vectorization={vectorization!r}; use one of "
                         f"{', '.join(VECTORIZATIONS)}")
    if num_envs <= 0:
        raise ValueError(f"num_envs must be positive, got {num_envs}")
    if env_fns is not None and backend == TENSOR:
        raise ValueError("env_fns makes gymnasium envs; it cannot be given with backend=tensor")
    if env_fns is None and resolve_backend(backend, name, wrappers=wrappers,
                                           env_kwargs=env_kwargs) == TENSOR:
        tensor = make_tensor_env(name, num_envs, device=device,
                                 mission=uses_mission(name) if mission is None else mission,
                                 direction=direction, env_kwargs=env_kwargs)
        if not parse_wrappers(wrappers):
            return tensor
        assert isinstance(tensor, PopgymTensorEnv)  # resolve_backend: wrappers only for these
        return apply_tensor_wrappers(tensor, wrappers)
    if env_fns is None:
        env_fns = env_constructors(name, num_envs, mission=mission, direction=direction,
                                   wrappers=wrappers, env_kwargs=env_kwargs)
    return VECTORIZATIONS[vectorization](env_fns, autoreset_mode=AutoresetMode.SAME_STEP)


def env_constructors(name: str, num_envs: int, *, mission: bool | None = None,
                     direction: bool = False, wrappers: Iterable[WrapperItem] = (),
                     env_kwargs: Mapping[str, Any] | None = None
                     ) -> list[Callable[[], gym.Env]]:
    """``num_envs`` constructors of env ``name`` (arguments as :func:`make_vector_env`'s), for
    a vector env or :class:`rlmem.envs.env_workers.EnvWorkers`; ``mission`` is resolved once,
    so that all copies agree."""
    if num_envs <= 0:
        raise ValueError(f"num_envs must be positive, got {num_envs}")
    with_mission = uses_mission(name) if mission is None else mission
    specs, kwargs = parse_wrappers(wrappers), dict(env_kwargs or {})
    return [lambda: make_env(name, mission=with_mission, direction=direction, wrappers=specs,
                             **kwargs)
            for _ in range(num_envs)]


@dataclass(frozen=True)
class EnvOptions:
    """How a run makes its envs, besides their name: what its config records.

    Training, transfer and evaluation envs of one run are all made with these options, so an
    agent is evaluated on the env it was trained on, or on another id built the same way.
    """

    mission: bool = False
    """Encode the MiniGrid mission."""
    direction: bool = False
    """Add the MiniGrid agent's compass heading to the observation."""
    wrappers: tuple[WrapperSpec, ...] = ()
    """Applied in order after :func:`gymnasium.make`."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Passed to :func:`gymnasium.make` (the run's ``env_kwargs``)."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> EnvOptions:
        """The options of a run's (resolved) config; runs that predate ``env_kwargs``,
        ``wrappers`` and ``direction`` used none of them."""
        return cls(mission=resolved_mission(config), direction=bool(config.get("direction")),
                   wrappers=parse_wrappers(config.get("wrappers") or ()),
                   kwargs=dict(config.get("env_kwargs") or {}))

    def make(self, name: str, **extra: Any) -> gym.Env:
        """One env ``name`` with these options; ``extra`` adds to (or replaces) ``kwargs``."""
        return make_env(name, mission=self.mission, direction=self.direction,
                        wrappers=self.wrappers, **{**self.kwargs, **extra})

    def make_vector(self, name: str, num_envs: int, vectorization: str = "sync",
                    backend: str = GYMNASIUM, device: torch.device | str = "cpu") -> VectorEnv:
        """``num_envs`` copies of env ``name`` with these options (:func:`make_vector_env`;
        ``backend`` and ``device`` as its)."""
        return make_vector_env(name, num_envs, mission=self.mission, direction=self.direction,
                               vectorization=vectorization, wrappers=self.wrappers,
                               env_kwargs=self.kwargs, backend=backend, device=device)

    def constructors(self, name: str, num_envs: int) -> list[Callable[[], gym.Env]]:
        """``num_envs`` constructors of env ``name`` with these options
        (:func:`env_constructors`)."""
        return env_constructors(name, num_envs, mission=self.mission, direction=self.direction,
                                wrappers=self.wrappers, env_kwargs=self.kwargs)

    def probe(self, name: str
              ) -> tuple[spaces.Space[Any], spaces.Space[Any], bool, int | None]:
        """The observation space, the action space, whether env ``name`` is MiniGrid and its
        :func:`episode_limit` (one env is made and closed)."""
        env = self.make(name)
        try:
            return (env.observation_space, env.action_space,
                    isinstance(env, MiniGridObservation), episode_limit(env))
        finally:
            env.close()


def episode_limit(env: gym.Env) -> int | None:
    """The most steps an episode of ``env`` lasts: a MiniGrid env's ``max_steps`` (which its
    ``env_kwargs`` may set), else its spec's ``max_episode_steps`` (gymnasium's time limit);
    None when it has neither."""
    unwrapped = env.unwrapped
    if isinstance(unwrapped, MiniGridEnv):
        return int(unwrapped.max_steps)
    return env.spec.max_episode_steps if env.spec is not None else None

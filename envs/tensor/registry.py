"""The tensor envs by short name: :data:`TENSOR_ENVS`, and :func:`make_tensor_env`.

Each entry names the gymnasium id of the env it reproduces, so a run may name the env either
way (``DoorKey-5x5`` or ``MiniGrid-DoorKey-5x5-v0``), and the ``env_kwargs`` it honours
(anything else is refused, so that no option the user gave is silently dropped).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rlmem.envs.tensor.base import TensorVectorEnv
from rlmem.envs.tensor.minigrid import (
    DoorKey,
    Fetch,
    GoToDoor,
    GoToObject,
    Memory,
    MiniGridTensorEnv,
    RedBlueDoors,
)
from rlmem.envs.tensor.popgym import POPGYM_TENSOR_ENVS, PopgymFactory


class TensorEnvFactory(Protocol):
    """Makes ``num_envs`` copies of one tensor env on ``device``; ``mission`` and
    ``direction`` as :func:`rlmem.envs.make_env`'s (a non-MiniGrid env refuses them True),
    ``env_kwargs`` those of :attr:`TensorEnvEntry.options`."""

    def __call__(self, num_envs: int, *, device: torch.device | str, mission: bool,
                 direction: bool, **env_kwargs: Any) -> TensorVectorEnv: ...


@dataclass(frozen=True)
class TensorEnvEntry:
    """One tensor env."""

    id: str
    """The gymnasium id of the env it reproduces."""
    make: TensorEnvFactory
    """Its constructor."""
    options: frozenset[str] = frozenset()
    """The ``env_kwargs`` it honours (gymnasium.make's keyword arguments of the original)."""


MINIGRID_OPTIONS = frozenset({"max_steps", "agent_view_size"})
"""The ``env_kwargs`` the tensor MiniGrid envs honour."""


def _minigrid(env_id: str, family: type[MiniGridTensorEnv], **arguments: Any
              ) -> TensorEnvEntry:
    return TensorEnvEntry(env_id, functools.partial(family, **arguments), MINIGRID_OPTIONS)


def _popgym(factory: PopgymFactory) -> TensorEnvEntry:
    """The entry of a tensor POPGym env (which honours no ``env_kwargs``)."""

    def make(num_envs: int, *, device: torch.device | str, mission: bool, direction: bool,
             **env_kwargs: Any) -> TensorVectorEnv:
        return factory(num_envs, device=device, mission=mission, direction=direction)
    return TensorEnvEntry(factory.id, make)


TENSOR_ENVS: dict[str, TensorEnvEntry] = {
    **{f"DoorKey-{size}x{size}": _minigrid(f"MiniGrid-DoorKey-{size}x{size}-v0", DoorKey,
                                           size=size)
       for size in (5, 6, 8, 16)},
    **{f"MemoryS{size}": _minigrid(f"MiniGrid-MemoryS{size}-v0", Memory, size=size)
       for size in (7, 9, 11, 13)},
    **{f"MemoryS{size}Random": _minigrid(f"MiniGrid-MemoryS{size}Random-v0", Memory, size=size,
                                         random_length=True)
       for size in (13, 17)},
    **{f"Fetch-{size}x{size}-N{objects}": _minigrid(f"MiniGrid-Fetch-{size}x{size}-N{objects}-v0",
                                                    Fetch, size=size, num_objs=objects)
       for size, objects in ((5, 2), (6, 2), (8, 3))},
    **{f"GoToObject-{size}x{size}-N2": _minigrid(f"MiniGrid-GoToObject-{size}x{size}-N2-v0",
                                                 GoToObject, size=size, num_objs=2)
       for size in (6, 8)},
    **{f"GoToDoor-{size}x{size}": _minigrid(f"MiniGrid-GoToDoor-{size}x{size}-v0", GoToDoor,
                                            size=size)
       for size in (5, 6, 8)},
    **{f"RedBlueDoors-{size}x{size}": _minigrid(f"MiniGrid-RedBlueDoors-{size}x{size}-v0",
                                                RedBlueDoors, size=size)
       for size in (6, 8)},
    **{name: _popgym(factory) for name, factory in POPGYM_TENSOR_ENVS.items()},
}
"""The tensor envs, by short name: MiniGrid's registered DoorKey, Memory, Fetch, GoToObject,
GoToDoor and RedBlueDoors envs (every other size is a constructor argument of the family's class
in :mod:`rlmem.envs.tensor.minigrid`) and the POPGym envs of
:data:`rlmem.envs.tensor.popgym.POPGYM_TENSOR_ENVS`, every difficulty."""


def tensor_env_name(name: str) -> str | None:
    """The short name of the tensor env of ``name`` (a short name or the gymnasium id, with or
    without a ``module:`` prefix), None when it has none."""
    if name in TENSOR_ENVS:
        return name
    env_id = name.rpartition(":")[2]  # gymnasium's module:EnvId
    return next((short for short, entry in TENSOR_ENVS.items() if entry.id == env_id), None)


def unsupported_options(name: str, env_kwargs: Mapping[str, Any]) -> list[str]:
    """The keys of ``env_kwargs`` that the tensor env of ``name`` does not honour (all of them
    when it has none)."""
    short = tensor_env_name(name)
    honoured = TENSOR_ENVS[short].options if short is not None else frozenset()
    return sorted(set(env_kwargs) - honoured)


def no_tensor_env(name: str) -> str:
    """The paragraph for an env without a tensor version under ``backend=tensor``."""
    return (f"env {name!r} has no tensor version, so it cannot run on the tensor backend. The "
            f"envs that have one are {', '.join(TENSOR_ENVS)} (each also by its gymnasium id, "
            "e.g. MiniGrid-DoorKey-5x5-v0). Use backend=gymnasium (or auto, which picks the "
            "tensor backend where there is one) to run this env as it is.")


def make_tensor_env(name: str, num_envs: int, *, device: torch.device | str = "cpu",
                    mission: bool = False, direction: bool = False,
                    env_kwargs: Mapping[str, Any] | None = None) -> TensorVectorEnv:
    """``num_envs`` copies of the tensor env of ``name`` on ``device``.

    Raises:
        ValueError: ``name`` has no tensor env (:func:`no_tensor_env`'s paragraph), or
            ``env_kwargs`` holds an option it does not honour.
    """
    short = tensor_env_name(name)
    if short is None:
        raise ValueError(no_tensor_env(name))
    kwargs = dict(env_kwargs or {})
    unsupported = unsupported_options(name, kwargs)
    if unsupported:
        raise ValueError(
            f"env_kwargs {unsupported} of env {name!r}: the tensor backend's {short} honours "
            f"only {sorted(TENSOR_ENVS[short].options) or 'none'}. Use backend=gymnasium to "
            "pass other options to the original env.")
    return TENSOR_ENVS[short].make(num_envs, device=device, mission=mission,
                                   direction=direction, **kwargs)

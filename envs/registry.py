"""Short MiniGrid names, their gymnasium ids and their transfer targets.

The six training/transfer pairs are those of the ReLSTM paper (Table 3): an agent trained on the
small layout is evaluated, without further training, on the large one. Any other registered
gymnasium id (``MiniGrid-Empty-8x8-v0``, ``CartPole-v1``, ``BabyAI-GoToLocal-v0``, ...) is
accepted when given in full, as is gymnasium's ``module:EnvId`` form, which imports ``module``
(where the env registers itself) first. Such an env has no transfer target unless it is one of
the ids below; a run names one with ``transfer_env=``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import gymnasium as gym
import minigrid  # noqa: F401  - importing minigrid registers its environments with gymnasium


@dataclass(frozen=True)
class EnvSpec:
    """A short environment name."""

    id: str
    """The gymnasium id, e.g. ``MiniGrid-DoorKey-5x5-v0``."""
    transfer: str | None = None
    """The short name of the environment to evaluate transfer on, if any."""


def _pair(train: str, target: str, train_id: str, target_id: str) -> dict[str, EnvSpec]:
    return {train: EnvSpec(train_id, transfer=target), target: EnvSpec(target_id)}


ENVS: dict[str, EnvSpec] = {
    **_pair("DoorKey-5x5", "DoorKey-16x16",
            "MiniGrid-DoorKey-5x5-v0", "MiniGrid-DoorKey-16x16-v0"),
    **_pair("RedBlueDoors-6x6", "RedBlueDoors-8x8",
            "MiniGrid-RedBlueDoors-6x6-v0", "MiniGrid-RedBlueDoors-8x8-v0"),
    **_pair("GoToObject-6x6-N2", "GoToObject-8x8-N2",
            "MiniGrid-GoToObject-6x6-N2-v0", "MiniGrid-GoToObject-8x8-N2-v0"),
    **_pair("MemoryS7", "MemoryS13", "MiniGrid-MemoryS7-v0", "MiniGrid-MemoryS13-v0"),
    **_pair("GoToDoor-5x5", "GoToDoor-8x8", "MiniGrid-GoToDoor-5x5-v0", "MiniGrid-GoToDoor-8x8-v0"),
    **_pair("Fetch-5x5-N2", "Fetch-8x8-N3", "MiniGrid-Fetch-5x5-N2-v0", "MiniGrid-Fetch-8x8-N3-v0"),
}
"""Short names of the paper's environments. Train envs name their transfer target."""


def env_spec(name: str) -> EnvSpec:
    """The :class:`EnvSpec` of a short name, a full gymnasium id, or ``module:EnvId``.

    A full id of one of the paper's environments gets its short name's transfer target. For
    ``module:EnvId``, ``module`` is imported (it registers the env) and the spec's id keeps the
    module, so that :func:`gymnasium.make` imports it too in every process that makes the env.

    Raises:
        KeyError: ``name`` is neither a short name nor a registered gymnasium id; the message
            lists the short names.
    """
    if name in ENVS:
        return ENVS[name]
    for spec in ENVS.values():
        if spec.id == name:
            return spec
    module, sep, env_id = name.rpartition(":")
    if sep:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise KeyError(f"env {name!r}: cannot import {module!r} ({error})") from None
    if env_id in gym.registry:
        return EnvSpec(name)
    raise KeyError(f"unknown env {name!r}; use one of {', '.join(ENVS)} or a full registered "
                   "gymnasium id such as MiniGrid-Empty-8x8-v0 or CartPole-v1 (module:EnvId "
                   "imports module first)")


def transfer_target(name: str) -> str:
    """The short name of ``name``'s transfer target.

    Raises:
        KeyError: unknown ``name``, or ``name`` has no paired target (listing those that do).
    """
    target = env_spec(name).transfer
    if target is None:
        paired = ", ".join(f"{key}->{spec.transfer}" for key, spec in ENVS.items()
                           if spec.transfer)
        raise KeyError(f"env {name!r} has no transfer target; the paired envs are {paired} "
                       "(train with transfer_env=<env> to pair any two envs with the same "
                       "spaces)")
    return target

"""Short env names (MiniGrid's and POPGym's), their gymnasium ids and their transfer targets.

The six training/transfer pairs are those of the ReLSTM paper (Table 3): an agent trained on the
small layout is evaluated, without further training, on the large one. Any other registered
gymnasium id (``MiniGrid-Empty-8x8-v0``, ``CartPole-v1``, ``BabyAI-GoToLocal-v0``, ...) is
accepted when given in full, as is gymnasium's ``module:EnvId`` form, which imports ``module``
(where the env registers itself) first. Such an env has no transfer target unless it is one of
the ids below; a run names one with ``transfer_env=``.

POPGym's envs (Morad et al., 2023, "POPGym: Benchmarking Partially Observable Reinforcement
Learning") go by the name POPGym registers them under without its ``popgym-`` prefix and
``-v0`` suffix: ``RepeatPreviousEasy`` is ``popgym-RepeatPreviousEasy-v0``. POPGym is an optional
extra (``pip install -e ".[popgym]"``), imported only when one of its envs is named, so the
names are listed here (:data:`POPGYM_NAMES`, POPGym 1.0.7's) rather than read from it. Their ids
keep the module (``popgym:popgym-RepeatPreviousEasy-v0``), so that :func:`gymnasium.make`
imports POPGym in every process that makes the env (an async vector env's workers too).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import gymnasium as gym
import minigrid  # noqa: F401  - importing minigrid registers its environments with gymnasium

POPGYM = "popgym"
"""POPGym's package: importing it registers its envs with gymnasium."""


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
    # the other sizes of the families the tensor backend has (rlmem.envs.tensor)
    **{name: EnvSpec(f"MiniGrid-{name}-v0")
       for name in ("DoorKey-6x6", "DoorKey-8x8", "MemoryS9", "MemoryS11", "MemoryS13Random",
                    "MemoryS17Random", "Fetch-6x6-N2", "GoToDoor-6x6")},
}
"""Short names of the paper's environments, and of the other sizes of their families that
MiniGrid registers.
Train envs name their transfer target."""


POPGYM_NAMES: tuple[str, ...] = tuple(
    f"{task}{level}"
    for task in ("Autoencode", "RepeatPrevious", "RepeatFirst", "CountRecall",
                 "PositionOnlyCartPole", "PositionOnlyPendulum", "VelocityOnlyCartpole",
                 "NoisyPositionOnlyCartPole", "NoisyPositionOnlyPendulum", "MultiarmedBandit",
                 "HigherLower", "Battleship", "Concentration", "MineSweeper")
    for level in ("Easy", "Medium", "Hard"))
"""Short names of POPGym 1.0.7's 42 envs, as it registers them (``VelocityOnlyCartpole``, lower
case ``p``, is POPGym's own spelling)."""

POPGYM_ENVS: dict[str, EnvSpec] = {name: EnvSpec(f"{POPGYM}:popgym-{name}-v0")
                                   for name in POPGYM_NAMES}
"""POPGym's envs by short name. They have no transfer target (a run names one with
``transfer_env=``)."""


def _popgym_spec(name: str) -> EnvSpec | None:
    """The spec of a POPGym env named by its short name, its gymnasium id or
    ``popgym:<id>``, after importing POPGym; None for any other name.

    Raises:
        KeyError: POPGym is not installed (saying how to install it).
    """
    short = name.removeprefix(f"{POPGYM}:").removeprefix("popgym-").removesuffix("-v0")
    spec = POPGYM_ENVS.get(short)
    if spec is None or name not in (short, spec.id, spec.id.partition(":")[2]):
        return None
    try:
        importlib.import_module(POPGYM)
    except ImportError as error:
        raise KeyError(f"env {name!r} is a POPGym env, and POPGym cannot be imported "
                       f"({error}): it is an optional extra, pip install 'rlmem[popgym]' (or "
                       "pip install -e '.[popgym]' in a clone of rlmem)") from None
    return spec


def env_spec(name: str) -> EnvSpec:
    """The :class:`EnvSpec` of a short name, a full gymnasium id, or ``module:EnvId``.

    A full id of one of the paper's environments gets its short name's transfer target. For
    ``module:EnvId``, ``module`` is imported (it registers the env) and the spec's id keeps the
    module, so that :func:`gymnasium.make` imports it too in every process that makes the env.
    A POPGym env, by its short name (``RepeatPreviousEasy``) or id, imports POPGym and has the
    id ``popgym:popgym-RepeatPreviousEasy-v0`` however it was named.

    Raises:
        KeyError: ``name`` is neither a short name nor a registered gymnasium id (the message
            lists the short names), or is a POPGym env and POPGym is not installed.
    """
    if name in ENVS:
        return ENVS[name]
    for spec in ENVS.values():
        if spec.id == name:
            return spec
    popgym_spec = _popgym_spec(name)
    if popgym_spec is not None:
        return popgym_spec
    module, sep, env_id = name.rpartition(":")
    if sep:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise KeyError(f"env {name!r}: cannot import {module!r} ({error})") from None
    if env_id in gym.registry:
        return EnvSpec(name)
    raise KeyError(f"unknown env {name!r}; use one of {', '.join(ENVS)}, a POPGym env "
                   "(RepeatPreviousEasy, CountRecallHard, ...: "
                   "rlmem.envs.registry.POPGYM_NAMES) or a full registered gymnasium id such "
                   "as MiniGrid-Empty-8x8-v0 or CartPole-v1 (module:EnvId imports module "
                   "first)")


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

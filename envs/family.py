"""Which family an env belongs to, for the agent's presets: MiniGrid, or any other env.

Our PPO's defaults are rl-starter-files' MiniGrid recipe; other envs (POPGym, classic control,
...) learn better with other values (:mod:`rlmem.agents.ppo.presets`). The family is read from
the env's registration, not from a made env: a MiniGrid env is one whose gymnasium entry point
lies in the ``minigrid`` package (MiniGrid's and BabyAI's envs), so deciding it costs no env
and needs no ``env_kwargs``.
"""

from __future__ import annotations

from enum import Enum

import gymnasium as gym

from rlmem.envs.registry import env_spec


class EnvFamily(Enum):
    """The families whose envs want different agent defaults."""

    minigrid = "minigrid"
    """MiniGrid's and BabyAI's grid worlds (registered by the ``minigrid`` package)."""
    other = "other"
    """Every other env."""


def env_family(name: str) -> EnvFamily:
    """The family of the env ``name`` (a short name, a gymnasium id or ``module:EnvId``).

    Raises:
        KeyError: ``name`` is no env (:func:`rlmem.envs.env_spec`).
    """
    env_id = env_spec(name).id.rpartition(":")[2]
    entry_point = gym.spec(env_id).entry_point
    module = entry_point if isinstance(entry_point, str) else entry_point.__module__
    return EnvFamily.minigrid if module.partition(".")[0] == "minigrid" else EnvFamily.other

"""The trainers behind ``python -m rlmem.train agent=<name>``, by agent name.

A trainer is ``train(cfg, run_dir) -> None``: ``cfg`` is the composed, validated
:class:`rlmem.schema.train.TrainConfig` (``env``, ``memory``, ``agent``, ``seed``, ``frames``,
``device``, ``num_envs``, ...) and ``run_dir`` the run directory, which exists. Modules are
imported only when their trainer is picked, so our PPO never imports stable-baselines3.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

Trainer = Callable[[Any, Path], None]
"""``train(cfg, run_dir)``."""

TRAINERS: dict[str, str] = {
    "ppo": "rlmem.agents.ppo_train:train",
    "sb3": "rlmem.agents.sb3.train:train",
}
"""Agent name -> ``module:function`` of its trainer."""


def get_trainer(name: str) -> Trainer:
    """The trainer of agent ``name``; a :class:`KeyError` lists the valid names."""
    if name not in TRAINERS:
        raise KeyError(f"unknown agent {name!r}; valid agents: {', '.join(sorted(TRAINERS))}")
    module, function = TRAINERS[name].split(":")
    return getattr(importlib.import_module(module), function)

"""Any rlmem cell inside sb3-contrib's ``RecurrentPPO`` (``agent=sb3``).

>>> from sb3_contrib import RecurrentPPO
>>> from rlmem.agents.sb3 import MemoryPolicy, MemoryCallback
>>> model = RecurrentPPO(MemoryPolicy, "CartPole-v1",
...                      policy_kwargs=dict(memory="gru", memory_kwargs=dict(hidden_size=32)))
>>> model.learn(256, callback=MemoryCallback())  # doctest: +SKIP

Importing the package registers the agent (:class:`~rlmem.agents.sb3.config.SB3Config`, its
trainer and its actor loader) only; the trainer, the actor and the names below import
stable-baselines3 when first used (PEP 562), so composing ``agent=ppo`` or ``agent=sb3`` never
does.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gymnasium import spaces

from rlmem.agents.registry import register_agent
from rlmem.agents.sb3.config import SB3Config

if TYPE_CHECKING:
    import torch

    from rlmem.agents.run_config import RunConfig
    from rlmem.agents.sb3.actor import SB3Actor
    from rlmem.agents.sb3.callback import MemoryCallback
    from rlmem.agents.sb3.errors import PolicyArgumentError
    from rlmem.agents.sb3.extractor import MiniGridExtractor
    from rlmem.agents.sb3.memory import PackedMemory
    from rlmem.agents.sb3.packing import StatePacker
    from rlmem.agents.sb3.policy import (
        SB3_DEFAULT_HIDDEN_SIZE,
        CnnMemoryPolicy,
        MemoryPolicy,
        MultiInputMemoryPolicy,
        attach_loss,
        translate_lstm_kwargs,
    )
    from rlmem.runs import Checkpoint, RunSession


def train(config: RunConfig[SB3Config], run: RunSession) -> None:
    """:func:`rlmem.agents.sb3.train.train`, imported (with stable-baselines3) when a run
    trains."""
    from rlmem.agents.sb3.train import train

    train(config, run)


def load_actor(run: Path, checkpoint: Checkpoint, observation_space: spaces.Space[Any],
               action_space: spaces.Space[Any], device: torch.device,
               eval_memory: dict[str, Any]) -> SB3Actor:
    """:func:`rlmem.agents.sb3.actor.load_actor`, imported (with stable-baselines3) when a run
    plays."""
    from rlmem.agents.sb3.actor import load_actor

    return load_actor(run, checkpoint, observation_space, action_space, device, eval_memory)


register_agent("sb3", SB3Config, train, load_actor)

_EXPORTS = {
    "MemoryCallback": "callback",
    "MiniGridExtractor": "extractor",
    "PolicyArgumentError": "errors",
    "PackedMemory": "memory",
    "StatePacker": "packing",
    "SB3_DEFAULT_HIDDEN_SIZE": "policy",
    "CnnMemoryPolicy": "policy",
    "MemoryPolicy": "policy",
    "MultiInputMemoryPolicy": "policy",
    "attach_loss": "policy",
    "translate_lstm_kwargs": "policy",
}
"""Each lazily exported name -> the submodule that defines it."""


def __getattr__(name: str) -> object:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = [
    "SB3_DEFAULT_HIDDEN_SIZE",
    "CnnMemoryPolicy",
    "MemoryCallback",
    "MemoryPolicy",
    "MiniGridExtractor",
    "MultiInputMemoryPolicy",
    "PackedMemory",
    "PolicyArgumentError",
    "SB3Config",
    "StatePacker",
    "attach_loss",
    "translate_lstm_kwargs",
]

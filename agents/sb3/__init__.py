"""Any rlmem cell inside sb3-contrib's ``RecurrentPPO`` (``agent=sb3``).

>>> from sb3_contrib import RecurrentPPO
>>> from rlmem.agents.sb3 import MemoryPolicy, MemoryCallback
>>> model = RecurrentPPO(MemoryPolicy, "CartPole-v1",
...                      policy_kwargs=dict(memory="gru", memory_kwargs=dict(hidden_size=32)))
>>> model.learn(256, callback=MemoryCallback())  # doctest: +SKIP

Importing the package registers :class:`~rlmem.agents.sb3.config.SB3Config` only; the names
below import stable-baselines3 when first used (PEP 562), so composing ``agent=ppo`` or
``agent=sb3`` never does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rlmem.agents.sb3.config import SB3Config

if TYPE_CHECKING:
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

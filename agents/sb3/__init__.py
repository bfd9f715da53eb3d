"""Any rlmem cell inside sb3-contrib's ``RecurrentPPO``.

>>> from sb3_contrib import RecurrentPPO
>>> from rlmem.agents.sb3 import MemoryPolicy, MemoryCallback
>>> model = RecurrentPPO(MemoryPolicy, "CartPole-v1",
...                      policy_kwargs=dict(memory="gru", memory_kwargs=dict(hidden_size=32)))
>>> model.learn(256, callback=MemoryCallback())  # doctest: +SKIP
"""

from rlmem.agents.sb3.callback import MemoryCallback
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

__all__ = [
    "SB3_DEFAULT_HIDDEN_SIZE",
    "CnnMemoryPolicy",
    "MemoryCallback",
    "MemoryPolicy",
    "MiniGridExtractor",
    "MultiInputMemoryPolicy",
    "PackedMemory",
    "StatePacker",
    "attach_loss",
    "translate_lstm_kwargs",
]

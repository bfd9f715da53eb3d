"""What the cells' loops read on the host about a chunk: which steps reset some batch item, and
the latest episode step at which an item enters the chunk.

A loop reads these once per chunk, before it starts, to choose its path (where to cut the
chunk, how many memory slots to visit, whether the episode steps fit the float type). On the
CPU a read is free. On CUDA it waits for the device to catch up, and while a CUDA graph is being
captured it is an error. A caller that knows the answers, because every chunk it runs starts
from the zero state and holds no resets (a supervised batch), says so with
:func:`fresh_chunks`, and the reads below return them without touching the device.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor

_FRESH: ContextVar[bool] = ContextVar("rlmem_fresh_chunks", default=False)


@contextmanager
def fresh_chunks() -> Iterator[None]:
    """Inside, every chunk a cell runs starts at episode step 0 and holds no resets.

    The caller promises this; nothing checks it (a check would be the very read it saves).
    :class:`rlmem.tasks.cuda_graph.GraphedLoss` captures under it, after running the same batch
    with the reads, and compares the two.
    """
    token = _FRESH.set(True)
    try:
        yield
    finally:
        _FRESH.reset(token)


def steps_with_resets(resets: Tensor) -> list[bool]:
    """Per step, whether any batch item resets there. Shapes: resets ``(T, B)`` bool."""
    if _FRESH.get():
        return [False] * resets.shape[0]
    return resets.any(dim=1).tolist()


def any_reset(resets: Tensor) -> bool:
    """Whether any batch item resets anywhere in the chunk."""
    return False if _FRESH.get() else bool(resets.any())


def latest_start(t0: Tensor) -> int:
    """The latest episode step at which a batch item enters the chunk. Shapes: t0 ``(B,)``."""
    return 0 if _FRESH.get() else int(t0.max())


def steps_with_resets_and_latest_start(resets: Tensor, t0: Tensor) -> tuple[list[bool], int]:
    """:func:`steps_with_resets` and :func:`latest_start` in one read."""
    if _FRESH.get():
        return [False] * resets.shape[0], 0
    flags = torch.cat([resets.any(dim=1).long(), t0.max().view(1)]).tolist()
    return [bool(flag) for flag in flags[:-1]], int(flags[-1])

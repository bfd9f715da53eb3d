"""Scratch memory of the engines, recycled across calls (CPU only): :data:`WORKSPACE`, and
:func:`carve` to cut a chunk's buffers out of one of its blocks."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

import torch
from torch import Tensor


class Workspace:
    """Scratch memory of the engines, recycled across calls (CPU only).

    A fresh large CPU allocation is mapped lazily, so the first write to each of its 4 KB pages
    faults into the kernel; on the per-step slices of a chunk's buffers that costs as much as
    the step's arithmetic. The engines therefore carve their internal buffers out of blocks
    taken from here, and give the blocks back once the chunk's backward has run (or at once
    without one). Outputs never alias a block. CUDA has its own caching allocator: there a
    block is a plain allocation.
    """

    SMALL = 1 << 16
    """Blocks below this many bytes are plain allocations: the allocator recycles those."""

    def __init__(self, limit: int = 1 << 30) -> None:
        self.limit = limit
        """Bytes of free blocks kept at most."""
        self._free: list[Tensor] = []
        self._held: list[tuple[Tensor, int]] = []
        self._lock = threading.Lock()

    def take(self, numel: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """A 1-D block of at least ``numel`` elements, of undefined content."""
        if device.type != "cpu" or numel * dtype.itemsize < self.SMALL:
            return torch.empty(numel, dtype=dtype, device=device)
        with self._lock:
            fits = [(block.numel(), index) for index, block in enumerate(self._free)
                    if block.dtype == dtype and numel <= block.numel() <= 2 * numel]
            if fits:
                return self._free.pop(min(fits)[1])
        return torch.empty(numel, dtype=dtype, device=device)

    HELD = 8
    """Blocks of :meth:`take_unshared` kept at most."""

    def take_unshared(self, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
                      use_count: Callable[[Tensor], int], rows: int | None = None) -> Tensor:
        """A tensor of ``shape`` for an output that outlives the call (a rollout state's
        memory): a view of a block kept here, reused once nothing else shares the block's
        storage (``use_count(block) == 1``, the compiled ``storage_use_count``). A state
        dropped by its caller so gives its pages to the next step's, instead of each step
        faulting in fresh ones.

        Its content is undefined, except with ``rows``: then ``[:, rows:]`` holds zeros, and the
        caller promises to write only ``[:, :rows]``. Each block remembers how far along dim 1
        it may hold non-zeros, so a rollout whose episodes grow a slot per step clears nothing
        and copies only the slots in use (MemLSTM's memory, whose empty slots are zero).
        """
        if device.type != "cpu":
            return torch.zeros(shape, dtype=dtype, device=device)
        inference = torch.is_inference_mode_enabled()  # such blocks stay in inference mode
        width = shape[1] if len(shape) > 1 else 1
        with self._lock:
            index = next((index for index, (block, _) in enumerate(self._held)
                          if block.shape == shape and block.dtype == dtype
                          and block.is_inference() == inference and use_count(block) == 1),
                         None)
            if index is None:  # zeros: a fresh block may hold non-zeros nowhere
                self._held.append((torch.zeros(shape, dtype=dtype, device=device), 0))
                if len(self._held) > self.HELD:
                    self._held.pop(0)
                index = len(self._held) - 1
            block, dirty = self._held[index]
            keep = width if rows is None else rows
            if keep < dirty:
                block[:, keep:dirty].zero_()
            self._held[index] = (block, keep)
            return block.view(shape)

    def give(self, *blocks: Tensor) -> None:
        """Return blocks from :meth:`take`; nothing may use them afterwards."""
        with self._lock:
            for block in blocks:
                if block.device.type == "cpu" and block.nbytes >= self.SMALL:
                    self._free.append(block)
            while sum(block.nbytes for block in self._free) > self.limit:
                self._free.pop(0)


WORKSPACE = Workspace()
"""The engines' shared :class:`Workspace`."""

_ALIGN = 16
"""Carved buffers start on multiples of this many elements (64 bytes in float32)."""


def carve(shapes: dict[str, tuple[int, ...]], dtype: torch.dtype,
           device: torch.device) -> tuple[Tensor, dict[str, Tensor]]:
    """One :data:`WORKSPACE` block holding a buffer of each shape, and the buffers."""
    spans = [-(-math.prod(shape) // _ALIGN) * _ALIGN for shape in shapes.values()]
    block = WORKSPACE.take(sum(spans), dtype, device)
    buffers, offset = {}, 0
    for (name, shape), span in zip(shapes.items(), spans, strict=True):
        # one strided view each (a slice and then a view took two calls, and a PPO update
        # carves three times per minibatch)
        buffers[name] = block.as_strided(shape, _contiguous_strides(shape),
                                         block.storage_offset() + offset)
        offset += span
    return block, buffers


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape``, in elements."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))

"""What a memory config costs before it is built: its cell on torch's ``meta`` device, and
whether training it fits in this machine's memory.

``memory.hidden_size=1000000000`` would otherwise end in an allocator traceback (or, where the
storage's size overflows 64 bits, in torch's own error) after the run has started. The cell is
built on the ``meta`` device, which allocates nothing, so its parameters can be counted for any
size, and a size whose training state cannot fit is refused with the estimate.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from rlmem.cells.base import Cell
from rlmem.cells.registry import make_cell_from_config

TRAINING_COPIES = 4
"""Copies of every parameter that training holds: the weights, their gradients and Adam's two
moments."""

_OVERFLOW = "overflow"
"""In torch's message when a tensor's size in bytes does not fit 64 bits."""


def physical_memory() -> int | None:
    """Bytes of this machine's memory; None where the OS does not say (the check is skipped)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def meta_cell(config: Any) -> Cell | None:
    """The cell of memory ``config`` on the ``meta`` device (input size 1, the smallest); None
    for a cell that cannot be built there (a plug-in that reads a value in ``__init__``), which
    then goes unchecked until it is built for real.

    Raises:
        ValueError: a value the cell itself refuses (``hidden_size=0``), or a size whose
            parameters take more bytes than 64 bits count.
    """
    try:
        with torch.device("meta"):
            return make_cell_from_config(config, input_size=1)
    except (RuntimeError, NotImplementedError) as error:
        if _OVERFLOW not in str(error).lower():
            return None
        raise ValueError(
            f"{_describe(config)} is too large for torch even to size its weights (more than "
            f"2**63 bytes: {str(error).strip()}). Nothing was started; choose a smaller "
            "memory.hidden_size.") from None


def check_cell_fits(config: Any) -> None:
    """Build memory ``config``'s cell on the ``meta`` device and refuse it when training it
    would hold more bytes than this machine has (:data:`TRAINING_COPIES` float32 copies of
    its parameters: a lower bound, as activations come on top).

    Raises:
        ValueError: naming ``memory.hidden_size``, the cell's parameter count and the estimate.
    """
    cell = meta_cell(config)
    available = physical_memory()
    if cell is None or available is None:
        return
    parameters = sum(parameter.numel() for parameter in cell.parameters())
    needed = parameters * TRAINING_COPIES * torch.finfo(torch.float32).bits // 8
    if needed > available:
        raise ValueError(
            f"{_describe(config)} has {parameters:.3g} parameters: training it holds at least "
            f"{readable_bytes(needed)} (weights, gradients and Adam's two moments, in "
            f"float32), more than this machine's {readable_bytes(available)} of memory. Nothing "
            "was started; choose a smaller memory.hidden_size (or fewer memory.num_layers).")


def _describe(config: Any) -> str:
    values = dict(config.items()) if hasattr(config, "items") else vars(config)
    return (f"memory={values.get('name')} with memory.hidden_size="
            f"{values.get('hidden_size')}")


def readable_bytes(count: int) -> str:
    """``count`` bytes in binary units, three significant digits (``137 GiB``)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    value, unit = float(count), 0
    while value >= 1024 and unit < len(units) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.3g} {units[unit]}"

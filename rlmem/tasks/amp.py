"""bf16 autocast for the supervised runs' forward passes (the ``amp`` setting)."""

from __future__ import annotations

import contextlib

import torch


def autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager[None]:
    """bf16 autocast on ``device`` when ``enabled``, else a no-op."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)

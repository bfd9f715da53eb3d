"""``device=auto|cpu|cuda|cuda:N`` as given on a command line."""

from __future__ import annotations

import torch


def resolve_device(spec: str) -> torch.device:
    """``auto`` picks CUDA when available, else the CPU; asking for absent CUDA is an error."""
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except RuntimeError as error:
        raise ValueError(f"device={spec!r} is not a device; use auto, cpu, cuda or cuda:N") \
            from error
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={spec!r} was asked for, but CUDA is not available here; "
                         "use device=cpu or device=auto")
    return device

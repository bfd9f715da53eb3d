"""``device=auto|cpu|cuda|cuda:N`` as given on a command line."""

from __future__ import annotations

import torch

CHOICES = "use auto, cpu, cuda or cuda:N"
"""The devices rlmem runs on, as a refusal names them."""


def resolve_device(spec: str) -> torch.device:
    """``auto`` picks CUDA when available, else the CPU; asking for absent CUDA (or a GPU
    number this machine lacks, or a kind of device rlmem does not run on) is an error.

    Raises:
        ValueError: the device cannot be used here; the message says what can.
    """
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except RuntimeError as error:
        raise ValueError(f"device={spec!r} is not a device; {CHOICES}") from error
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device={spec!r} is a {device.type} device, which rlmem does not run "
                         f"on; {CHOICES}")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={spec!r} was asked for, but CUDA is not available here; "
                         "use device=cpu or device=auto")
    if device.type == "cuda" and device.index is not None \
            and device.index >= (count := torch.cuda.device_count()):
        raise ValueError(f"device={spec!r} was asked for, but this machine has {count} CUDA "
                         f"device{'s' if count != 1 else ''} (cuda:0 to cuda:{count - 1})")
    return device

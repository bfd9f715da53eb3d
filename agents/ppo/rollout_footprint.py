"""Whether a run's rollout fits its device's memory, checked before the run starts.

``num_envs=1000000000`` would otherwise fail inside the envs' or the rollout's first allocation,
with an allocator's traceback, after the run's folder was made. The estimate is a lower bound:
the rollout's observations (``frames_per_env + 1`` per env: the steps and the observation after
them) and :data:`SCALARS_PER_FRAME` float32 values per frame, without the envs' own state, the
update's chunk copies or the model's activations. A run refused by it could not have run; one
it lets through may still fail, later, where the other terms do not fit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from rlmem.cells.footprint import physical_memory, readable_bytes

SCALARS_PER_FRAME = 4
"""float32 values the rollout keeps per frame at least: log-probability, value, reward and
advantage."""

UNKNOWN_SPACE_BYTES = 0
"""Bytes counted for an observation space whose size is not known here (a lower bound)."""


def observation_bytes(space: spaces.Space[Any]) -> int:
    """Bytes of one observation of ``space`` as the rollout stores it (int64 for discrete
    indices; :data:`UNKNOWN_SPACE_BYTES` for a space of no fixed size, such as text)."""
    if isinstance(space, spaces.Dict):
        return sum(observation_bytes(part) for part in space.spaces.values())
    if isinstance(space, spaces.Tuple):
        return sum(observation_bytes(part) for part in space.spaces)
    if isinstance(space, spaces.Discrete):
        return np.dtype(np.int64).itemsize
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.prod(space.shape)) * np.dtype(np.int64).itemsize
    if isinstance(space, spaces.Box | spaces.MultiBinary):
        return int(np.prod(space.shape)) * np.dtype(space.dtype).itemsize
    return UNKNOWN_SPACE_BYTES


def frame_bytes(observation_space: spaces.Space[Any]) -> int:
    """Bytes the rollout keeps per frame at least: the observation and
    :data:`SCALARS_PER_FRAME` float32 values."""
    return observation_bytes(observation_space) + SCALARS_PER_FRAME * 4


def rollout_bytes(observation_space: spaces.Space[Any], num_envs: int,
                  frames_per_env: int) -> int:
    """The rollout's lower-bound size (the module docstring): ``frames_per_env + 1``
    observations per env and the values of every frame."""
    return math.prod((num_envs, frames_per_env + 1, frame_bytes(observation_space)))


def device_memory(device: torch.device) -> int | None:
    """Bytes the rollout may take on ``device``: the machine's memory for the CPU, the GPU's
    free memory for CUDA; None where it is not known (the check is skipped)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return physical_memory() if device.type == "cpu" else None


def check_rollout_fits(observation_space: spaces.Space[Any], num_envs: int,
                       frames_per_env: int, device: torch.device) -> None:
    """Refuse a rollout whose lower-bound size (module docstring) exceeds ``device``'s memory.

    Raises:
        ValueError: naming ``num_envs`` and ``agent.frames_per_env``, the estimate and the
            memory there is.
    """
    available = device_memory(device)
    if available is None:
        return
    per_frame = frame_bytes(observation_space)
    needed = rollout_bytes(observation_space, num_envs, frames_per_env)
    if needed > available:
        where = ("this machine's memory" if device.type == "cpu"
                 else f"the free memory of {device}")
        raise ValueError(
            f"num_envs={num_envs} × agent.frames_per_env={frames_per_env}: the rollout alone "
            f"holds at least {readable_bytes(needed)} ({per_frame} bytes a frame: the "
            f"observation and {SCALARS_PER_FRAME} float32 values), more than {where}, "
            f"{readable_bytes(available)}. Nothing was started; choose fewer num_envs or a "
            "shorter agent.frames_per_env.")

"""What every CLI run shares: device choice, atomic checkpoints, the CSV/TensorBoard log."""

from rlmem.runs.checkpoint import (
    CheckpointMismatchError,
    check_compatible,
    load_checkpoint,
    save_checkpoint,
)
from rlmem.runs.device import resolve_device
from rlmem.runs.logger import RunLogger
from rlmem.runs.resume import CHECKPOINT_NAME, start_run

__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointMismatchError",
    "RunLogger",
    "check_compatible",
    "load_checkpoint",
    "resolve_device",
    "save_checkpoint",
    "start_run",
]

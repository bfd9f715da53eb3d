"""What every CLI run shares: device choice, atomic checkpoints, the CSV/TensorBoard log."""

from rlmem.runs.checkpoint import (
    CheckpointMismatchError,
    check_compatible,
    load_checkpoint,
    save_checkpoint,
)
from rlmem.runs.device import resolve_device
from rlmem.runs.errors import USER_ERRORS, NonFiniteLossError, reported_as_cli_errors
from rlmem.runs.logger import RunLogger
from rlmem.runs.resume import CHECKPOINT_NAME, start_run

__all__ = [
    "CHECKPOINT_NAME",
    "USER_ERRORS",
    "CheckpointMismatchError",
    "NonFiniteLossError",
    "RunLogger",
    "check_compatible",
    "load_checkpoint",
    "reported_as_cli_errors",
    "resolve_device",
    "save_checkpoint",
    "start_run",
]

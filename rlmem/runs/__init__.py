"""What every run shares: the run skeleton (:func:`open_run`), its typed checkpoint, the
run-directory lock, device choice, the CSV/TensorBoard log and the CLI's error reporting."""

from rlmem.runs.checkpoint import (
    Checkpoint,
    CheckpointMismatchError,
    check_compatible,
    load_checkpoint,
    save_checkpoint,
)
from rlmem.runs.device import resolve_device
from rlmem.runs.errors import (
    INTERRUPTED,
    USER_ERRORS,
    CheckpointWriteError,
    NonFiniteLossError,
    RunDirectoryError,
    RunError,
    RunInterrupted,
    RunLockedError,
    UnreadableCheckpointError,
    reported_as_cli_errors,
)
from rlmem.runs.logger import RunLogger
from rlmem.runs.session import (
    CHECKPOINT_NAME,
    ResumeRules,
    RunSession,
    checkpoint_to_resume,
    open_run,
    resolved_config,
)

__all__ = [
    "CHECKPOINT_NAME",
    "INTERRUPTED",
    "USER_ERRORS",
    "Checkpoint",
    "CheckpointMismatchError",
    "CheckpointWriteError",
    "NonFiniteLossError",
    "ResumeRules",
    "RunDirectoryError",
    "RunError",
    "RunInterrupted",
    "RunLockedError",
    "RunLogger",
    "RunSession",
    "UnreadableCheckpointError",
    "check_compatible",
    "checkpoint_to_resume",
    "load_checkpoint",
    "open_run",
    "reported_as_cli_errors",
    "resolve_device",
    "resolved_config",
    "save_checkpoint",
]

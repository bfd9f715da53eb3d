"""Supervised sequence tasks through the same cells: copy, transfer-copy, denoise, adding.

>>> import torch
>>> from rlmem.tasks import make_task
>>> task = make_task("copy")
>>> batch = task.sample(4, 100, torch.Generator().manual_seed(0))
>>> batch.inputs.shape, batch.targets.shape
(torch.Size([120, 4]), torch.Size([120, 4]))
"""

from rlmem.tasks import adding, copy, denoise  # noqa: F401  (register the tasks)
from rlmem.tasks.base import Baseline, SequenceTask, TaskBatch
from rlmem.tasks.figures import write_figures
from rlmem.tasks.held_out import evaluate, predict
from rlmem.tasks.model import SequenceModel
from rlmem.tasks.registry import TASKS, make_task, make_task_from_config, register_task
from rlmem.tasks.trainer import (
    CHECKPOINT_NAME,
    NonFiniteLossError,
    Schedule,
    SupervisedTrainer,
    TrainResult,
)

__all__ = [
    "CHECKPOINT_NAME",
    "TASKS",
    "Baseline",
    "NonFiniteLossError",
    "Schedule",
    "SequenceModel",
    "SequenceTask",
    "SupervisedTrainer",
    "TaskBatch",
    "TrainResult",
    "evaluate",
    "make_task",
    "make_task_from_config",
    "predict",
    "register_task",
    "write_figures",
]

"""A supervised run's saved model, rebuilt from its checkpoint for analysis after training."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlmem.cells import make_cell_from_config
from rlmem.runs import CHECKPOINT_NAME, load_checkpoint
from rlmem.runs.restore import ON_EVALUATE, load_state
from rlmem.tasks.base import SequenceTask
from rlmem.tasks.model import SequenceModel
from rlmem.tasks.registry import make_task_from_config


@dataclass(frozen=True)
class SavedModel:
    """A trained model in eval mode, its task, the run's recorded config and how many
    iterations trained it."""

    model: SequenceModel
    task: SequenceTask
    config: dict[str, Any]
    iteration: int

    @property
    def seed(self) -> int:
        return int(self.config["seed"])


def load_saved_model(run_dir: Path, seq_len: int | None = None) -> SavedModel:
    """The model of ``run_dir``'s checkpoint (loaded with ``weights_only=True``), built to run at
    delay ``seq_len`` (default: the training delay).

    A delay other than the training one uses the run's ``eval_memory`` (MemLSTM's capacity),
    as the run's own transfer evaluation does.

    Raises:
        ValueError: ``seq_len`` is not one the task can make (:meth:`check_seq_len`).
        IncompatibleStateError: the weights do not fit the model of the run's own config.
    """
    checkpoint = load_checkpoint(run_dir / CHECKPOINT_NAME)
    config = checkpoint.config
    task = make_task_from_config(config["task"])
    if seq_len is not None:
        task.check_seq_len(seq_len)
    memory = dict(config["memory"])
    if seq_len not in (None, config["seq_len"]):
        memory.update(config.get("eval_memory") or {})
    model = SequenceModel(make_cell_from_config(memory, input_size=task.input_size),
                          task.output_size, task.categorical)
    load_state(model, checkpoint, "model", run_dir / CHECKPOINT_NAME, ON_EVALUATE)
    model.eval()
    return SavedModel(model, task, config, checkpoint.count("iteration"))

"""Starting a supervised run from another run's model weights: a curriculum over the delay T."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rlmem.cells import make_cell_from_config
from rlmem.runs import CHECKPOINT_NAME, load_checkpoint
from rlmem.runs.restore import fitting_state
from rlmem.tasks.model import SequenceModel
from rlmem.tasks.registry import make_task_from_config

MATCHED_SECTIONS = ("task", "memory")
"""Config sections the source run must share with the warm-started one: they decide the
model, and a curriculum that changed them would be a different model under the same name."""


def warm_start_weights(source: str | Path, config: Mapping[str, Any]) -> dict[str, Tensor]:
    """The model weights of ``source`` (a run directory, or its checkpoint file), checked to
    come from a run of the same task and memory as ``config`` and to fit its model.

    A key that only one of the two configs records (a hyperparameter added to a cell after the
    source was trained) is not compared; a key both record must hold the same value. Called
    before the run starts, so a bad ``warm_start`` costs nothing.

    Raises:
        ValueError: ``source`` holds no checkpoint, or that of an RL run; or the source's
            task or memory differs from ``config``'s, the message naming each differing key.
        IncompatibleStateError: its weights do not fit the model ``config`` builds.
    """
    path = Path(source)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        found = ("a run directory without a checkpoint" if path.parent.is_dir()
                 and path.name == CHECKPOINT_NAME else "nothing")
        raise ValueError(
            f"warm_start={source}: no checkpoint there ({path} does not exist; found {found}). "
            "Nothing was started and no run directory was written. Give warm_start a run "
            f"directory that has saved its {CHECKPOINT_NAME} (or the file itself), or drop "
            "warm_start to start from fresh weights.")
    checkpoint = load_checkpoint(path)
    if not isinstance(checkpoint.config.get("task"), Mapping):
        agent = checkpoint.config.get("agent")
        trainer = (f"an RL run (agent={agent['name']})" if isinstance(agent, Mapping)
                   and "name" in agent else "no supervised run (its config names no task)")
        raise ValueError(
            f"warm_start={source}: {path} is the checkpoint of {trainer}, whose model reads "
            "observations, not a task's sequences. A warm start takes the model of a "
            "supervised run (python -m rlmem.supervised) of the same task and memory. Nothing "
            "was started and no run directory was written; give warm_start such a run, or "
            "drop it.")
    differences = [
        f"{section}.{key}: {saved[key]!r} there, {current[key]!r} here"
        for section in MATCHED_SECTIONS
        for saved, current in [(checkpoint.config.get(section, {}), config[section])]
        for key in sorted(saved.keys() & current.keys())
        if saved[key] != current[key]]
    if differences:
        raise ValueError(f"warm_start={source} was trained on another task or memory; a warm "
                         "start may change only the training schedule (seq_len, lr, ...):\n  "
                         + "\n  ".join(differences))
    task = make_task_from_config(config["task"])
    with torch.device("meta"):  # shapes only: nothing is allocated
        model = SequenceModel(make_cell_from_config(config["memory"], input_size=task.input_size),
                              task.output_size, task.categorical)
    return dict(fitting_state(model, checkpoint, "model", path,
                              "Warm-start from another run, or drop warm_start."))

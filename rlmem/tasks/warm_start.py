"""Starting a supervised run from another run's model weights: a curriculum over the delay T."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import Tensor

from rlmem.runs import CHECKPOINT_NAME, load_checkpoint

MATCHED_SECTIONS = ("task", "memory")
"""Config sections the source run must share with the warm-started one: they decide the
model, and a curriculum that changed them would be a different model under the same name."""


def warm_start_weights(source: str | Path, config: Mapping[str, Any]) -> dict[str, Tensor]:
    """The model weights of ``source`` (a run directory, or its checkpoint file), checked to
    come from a run of the same task and memory as ``config``.

    A key that only one of the two configs records (a hyperparameter added to a cell after the
    source was trained) is not compared; a key both record must hold the same value.

    Raises:
        FileNotFoundError: ``source`` holds no checkpoint.
        ValueError: the source's task or memory differs from ``config``'s; the message names
            each differing key.
    """
    path = Path(source)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"warm_start={source}: no checkpoint there (expected a run "
                                f"directory holding {CHECKPOINT_NAME}, or the file itself)")
    checkpoint = load_checkpoint(path)
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
    return dict(checkpoint.states["model"])

"""Starting a run in its directory: resume from a compatible checkpoint, or start afresh."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from rlmem.runs.checkpoint import check_compatible, load_checkpoint

CHECKPOINT_NAME = "checkpoint.pt"
"""The file name of a run's (single, atomically replaced) checkpoint."""


def start_run(run_dir: Path, config: Mapping[str, Any], sections: Iterable[str], *,
              resume: bool, map_location: torch.device | str | None = "cpu"
              ) -> dict[str, Any] | None:
    """Prepare ``run_dir`` for a run of ``config``; return the checkpoint to resume from.

    - With ``resume`` and a checkpoint in ``run_dir``, it is loaded (weights only) and must
      have been written with the same ``sections`` of the config, else
      :class:`~rlmem.runs.CheckpointMismatchError` is raised before anything is written.
    - Without ``resume``, a checkpoint there is deleted, so that the run starts afresh even if
      it is killed before its first checkpoint.
    - The resolved ``config`` is written to ``config.yaml``.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / CHECKPOINT_NAME
    checkpoint = None
    if path.exists() and resume:
        checkpoint = load_checkpoint(path, map_location=map_location)
        check_compatible(checkpoint["config"], config, sections)
    elif path.exists():
        path.unlink()
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(dict(config)))
    return checkpoint

"""The keys every training command shares: where its run is written, and what it does with a
folder that already holds one.

:class:`~rlmem.schema.train.TrainConfig` (``python -m rlmem.train``) and
:class:`~rlmem.schema.supervised.SupervisedConfig` (``python -m rlmem.supervised``) inherit
them, so they are written and described once; each command's YAML gives ``run_dir`` its
default, through its run-name resolver (:mod:`rlmem.schema.run_names`).
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING


@dataclass
class RunFolderConfig:
    """The run directory of a training command, and how an existing one is treated."""

    run_dir: str = MISSING
    """The run directory. Default: runs/<agent>/<env>/<cell>/seed<seed> (rlmem.train),
    runs/supervised/<task>/<cell>_T<seq_len>_seed<seed> (rlmem.supervised), with the settings
    that differ from the defaults after the cell (relstm+memory.hidden_size-128), or a recipe's
    or +preset's name in their place, so that runs of other settings never share a folder
    (rlmem/schema/run_names.py)."""
    resume: bool = True
    """Continue from the run directory's checkpoint when there is one; false starts afresh,
    after moving the earlier run's files into <run_dir>/previous/<time>/ (nothing is
    deleted)."""
    force: bool = False
    """Use run_dir even though it is a non-empty folder that rlmem did not make (its files of
    the names a run writes are replaced). Without it such a folder is refused."""

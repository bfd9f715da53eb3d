"""``${runs_root:<folder>}``: the folder a run directory's default path starts from.

A single run puts its run directory under ``<folder>`` (``runs``); a sweep (``-m``) under the
sweep's ``hydra.sweep.dir``, whose default is the same folder, so ``hydra.sweep.dir=<folder>``
roots a whole sweep elsewhere. Hydra itself creates no run directory (its run dir and its
jobs' sweep subdir are ``.``): the run does, once its config is checked. Outside a Hydra
application (the compose API of the suites and tests) it is ``<folder>``.
"""

from __future__ import annotations

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

RESOLVER = "runs_root"


def runs_root(default: str) -> str:
    """``hydra.sweep.dir`` inside a sweep's job, else ``default``."""
    if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
        return str(HydraConfig.get().sweep.dir)
    return default


def register_runs_root() -> None:
    """Register the resolver (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, runs_root)

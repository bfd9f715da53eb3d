"""A short supervised run in the test's own process, for tests that watch what it calls."""

from __future__ import annotations

from pathlib import Path


def run_supervised(run_dir: Path, *overrides: str) -> None:
    """``python -m rlmem.supervised`` with ``overrides`` into ``run_dir``, on the CPU, one
    iteration, without a progress bar or figures (each may be overridden)."""
    from hydra import compose, initialize_config_dir

    from rlmem.schema.memory import CONF_DIR
    from rlmem.supervised import run

    defaults = ["iterations=1", "eval_every=1", "progress_bar=false", "figures=false",
                "device=cpu"]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("supervised", overrides=[*defaults, *overrides])
    run(cfg, run_dir)

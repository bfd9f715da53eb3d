"""A value of a run's ``config.yaml``, read fast, for the aggregators that read hundreds.

The aggregators need one or two plain top-level keys of each run's config (``frames``,
``stop_return``); OmegaConf's loader took most of their time. libyaml's parser (PyYAML's
``CSafeLoader``, the pure-Python one where it is missing) reads the same values.
"""

from __future__ import annotations

from pathlib import Path

import yaml


def config_value(run: Path, key: str) -> object:
    """The top-level ``key`` of ``run/config.yaml`` (None if it is not set)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    config = yaml.load((run / "config.yaml").read_text(), Loader=loader)
    return config.get(key) if isinstance(config, dict) else None

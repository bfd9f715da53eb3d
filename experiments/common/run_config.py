"""A run's ``config.yaml`` and its evaluation reports, read fast and named when they are not
what rlmem writes.

The aggregators need one or two plain top-level keys of each run's config (``frames``,
``stop_return``); OmegaConf's loader took most of their time. libyaml's parser (PyYAML's
``CSafeLoader``, the pure-Python one where it is missing) reads the same values. A file that
something outside rlmem tore or replaced (not YAML, a list, a report cut short) is named in
one paragraph (:class:`UnreadableRecordError`), never a parser's traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from rlmem.runs.errors import RunError

READ_ONLY = ("It was only read: nothing was changed. Fix it or move the run away, then run "
             "this again.")
"""What a failed read leaves, and what to do."""


class UnreadableRecordError(RunError):
    """A run's ``config.yaml`` or evaluation report is not a file rlmem could have written."""


def run_config(run: Path) -> dict[str, Any]:
    """``run/config.yaml`` as a mapping.

    Raises:
        UnreadableRecordError: it cannot be read, is not YAML, or holds no mapping.
    """
    path = run / "config.yaml"
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        config = yaml.load(path.read_text(), Loader=loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UnreadableRecordError(f"{path} cannot be read as YAML ({reason}). "
                                    f"{READ_ONLY}") from None
    if not isinstance(config, dict):
        raise UnreadableRecordError(f"{path} holds a {type(config).__name__}, not the mapping of "
                                    f"keys a run's config is. {READ_ONLY}")
    return config


def config_value(run: Path, key: str) -> object:
    """The top-level ``key`` of ``run/config.yaml`` (None if it is not set).

    Raises:
        UnreadableRecordError: the file is not a config (:func:`run_config`).
    """
    return run_config(run).get(key)


def read_report(path: Path, keys: tuple[str, ...] = ("frames", "episodes")) -> dict[str, Any]:
    """An evaluation report (``<run>/eval/*.json``) holding ``keys`` (every report has them).

    Raises:
        UnreadableRecordError: it cannot be read, is not JSON, or is not a report.
    """
    try:
        report = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise UnreadableRecordError(f"{path} cannot be read as JSON ({error}): cut short or "
                                    f"altered outside rlmem. {READ_ONLY}") from None
    missing = ([] if not isinstance(report, dict) else
               [key for key in keys if key not in report])
    if not isinstance(report, dict) or missing:
        raise UnreadableRecordError(
            f"{path} is not an evaluation report rlmem wrote (it lacks "
            f"{', '.join(missing) or 'a mapping of keys'}). {READ_ONLY}")
    return report

"""The repository's scripts (``benchmarks/``, ``experiments/``) loaded as modules by tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """Import the script at ``path`` as the module ``name`` (registered in ``sys.modules``,
    where dataclasses look their module up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

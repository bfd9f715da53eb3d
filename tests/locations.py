"""Where things are, for tests in any folder of ``tests/``: the repository, ``tests/`` itself
(its helper modules, which a CLI in a subprocess imports with it on ``PYTHONPATH``) and the
committed fixtures."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
"""``tests/``: the helpers (``cli_runner``, ``gym_envs``, ...) and ``conftest.py``."""
REPO = TESTS.parent
"""The repository's root."""
FIXTURES = TESTS / "fixtures"
"""Small committed inputs (an rlmem 0.1 run)."""

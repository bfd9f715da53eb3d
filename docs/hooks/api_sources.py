"""MkDocs hook: the source tree that mkdocstrings reads, with every package where it is imported.

The distribution maps ``rlmem.agents`` to the top-level ``agents/`` folder and ``rlmem.envs`` to
``envs/`` (``PACKAGE_DIR`` in ``setup.py``). Griffe, which reads the sources for mkdocstrings,
finds a subpackage by its folder, so it would find no ``rlmem/agents``. Before every build this
hook lays out ``build/docs_api/rlmem/`` (``build/`` is ignored by git): a link to each entry of
``rlmem/``, plus a link named after each mapped subpackage to its folder. ``mkdocs.yml`` points
the python handler's ``paths`` there. ``PACKAGE_DIR`` is read from ``setup.py`` with ``ast``, so a
new mapping needs no change here.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

REPO = Path(__file__).resolve().parents[2]
"""The repository's root."""

STAGE = REPO / "build" / "docs_api"
"""Where the linked source tree is laid out (``paths`` of the python handler in mkdocs.yml)."""


def package_dirs(setup_py: Path) -> dict[str, str]:
    """``PACKAGE_DIR`` of ``setup.py``: each package and its folder, relative to the root.

    Raises:
        ValueError: ``setup.py`` assigns no ``PACKAGE_DIR`` literal.
    """
    for node in ast.parse(setup_py.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "PACKAGE_DIR"):
            mapping = ast.literal_eval(node.value)
            return {str(package): str(folder) for package, folder in mapping.items()}
    raise ValueError(f"{setup_py} assigns no PACKAGE_DIR = {{package: folder}} literal")


def stage_sources(repo: Path, stage: Path) -> None:
    """Lay out ``stage`` as a folder of links in which every package of ``repo``'s
    ``PACKAGE_DIR`` sits where it is imported from (``stage/rlmem/agents`` -> ``agents/``)."""
    mapping = package_dirs(repo / "setup.py")
    if stage.is_symlink() or stage.is_file():
        stage.unlink()
    elif stage.exists():
        shutil.rmtree(stage)
    # Shortest names first: a package's folder exists before its mapped subpackages are linked.
    for package in sorted(mapping, key=lambda name: name.count(".")):
        folder = repo / mapping[package]
        target = stage.joinpath(*package.split("."))
        if "." in package:
            target.symlink_to(folder, target_is_directory=True)
            continue
        target.mkdir(parents=True)
        for entry in folder.iterdir():
            if entry.name != "__pycache__":
                (target / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())


@event_priority(100)
def on_config(config: Any) -> Any:
    """Lay out :data:`STAGE` before mkdocstrings reads any source: first, since mkdocstrings'
    own ``on_config`` makes the python handler, which drops a search path that does not exist
    yet (and a fresh clone has no ``build/``)."""
    stage_sources(REPO, STAGE)
    return config

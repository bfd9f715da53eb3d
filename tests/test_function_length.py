"""No function over 60 lines in the library: a long function is several ideas that want names.

The C++ loops of ``rlmem/cells/_engines/csrc`` are exempt (they are not Python). Each folder
is its own case, so that a failure names the folder and lists its offenders.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LIMIT = 60
"""The most lines a function may span, from its ``def`` to its last line."""

FOLDERS = {
    "rlmem/cells": ("rlmem/cells", ()),
    "rlmem (besides cells)": ("rlmem", ("rlmem/cells",)),
    "agents": ("agents", ()),
    "envs": ("envs", ()),
}
"""Each case: a folder, and the folders under it that another case covers."""


def long_functions(folder: str, skip: tuple[str, ...]) -> list[str]:
    """``path:line name (n lines)`` for every function of ``folder`` over :data:`LIMIT`."""
    found = []
    for path in sorted((REPO / folder).rglob("*.py")):
        relative = path.relative_to(REPO).as_posix()
        if any(relative.startswith(f"{other}/") for other in skip):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LIMIT:
                    found.append(f"{relative}:{node.lineno} {node.name} ({lines} lines)")
    return found


def _case(name: str) -> object:
    marks = [] if name == "rlmem/cells" else [
        pytest.mark.xfail(strict=False, reason="h52c: the config half of issue 52")]
    return pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", [_case(name) for name in FOLDERS])
def test_no_function_is_over_60_lines(name: str) -> None:
    folder, skip = FOLDERS[name]
    offenders = long_functions(folder, skip)
    assert not offenders, (f"{len(offenders)} function(s) in {folder} over {LIMIT} lines "
                           "(split each into named steps):\n" + "\n".join(offenders))

"""The engines take tensors and know no cell; a reset is applied through its one rule.

An engine (:mod:`rlmem.cells._engines`) is a function of inputs, weights, state, resets and
hyperparameters: it imports no module that holds a cell, so no cell ↔ engine import circle can
form. Every reset of a state, and every gradient stopped at one, goes through
:mod:`rlmem.cells.resets` (Python) or ``csrc/reset.h`` (C++); a ``masked_fill`` elsewhere in
the engines fills by a slot's validity, never by a reset.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import rlmem.cells

CELLS = Path(rlmem.cells.__file__).parent
ENGINES = CELLS / "_engines"
PACKAGE = "rlmem.cells"


def _imports(path: Path) -> set[str]:
    """The modules of ``rlmem`` that ``path`` imports, anywhere in it (``TYPE_CHECKING`` too),
    including ``from rlmem.cells import x`` as ``rlmem.cells.x``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("rlmem")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlmem"):
            assert node.module is not None
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if (CELLS.parent.parent / f"{node.module}.{alias.name}".replace(
                          ".", "/")).with_suffix(".py").exists()}
    return found


def _module_path(module: str) -> Path:
    path = CELLS.parent.parent / module.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _holds_a_cell(module: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``module`` is, or imports (transitively), the cell contract or a cell."""
    if module in (f"{PACKAGE}.base", PACKAGE) or module in seen:
        return module not in seen
    path = _module_path(module)
    if not path.exists():
        return False
    return any(_holds_a_cell(other, seen | {module}) for other in _imports(path))


ENGINE_FILES = sorted(ENGINES.glob("*.py"))


@pytest.mark.parametrize("path", ENGINE_FILES, ids=lambda path: path.name)
def test_an_engine_imports_no_cell(path: Path) -> None:
    cells = sorted(module for module in _imports(path) if _holds_a_cell(module))
    assert not cells, (f"{path.relative_to(CELLS.parent.parent)} imports {cells}, which hold "
                       "a cell: an engine takes tensors (give it what it needs as arguments, "
                       "or move a shared type to a module that imports no cell)")


def test_the_check_sees_a_cell_import() -> None:
    """The check above can fail: a cell module is recognised as one, and an engine's shared
    modules are not."""
    assert _holds_a_cell(f"{PACKAGE}.relstm") and _holds_a_cell(f"{PACKAGE}.screening")
    assert _holds_a_cell(f"{PACKAGE}.base")
    assert not _holds_a_cell(f"{PACKAGE}.time_loop")
    assert not _holds_a_cell(f"{PACKAGE}.resets")


RESET_HELPERS = {CELLS / "resets.py", ENGINES / "csrc" / "reset.h"}
VALIDITY = re.compile(r"masked_fill_?\(\s*~?\w*(valid|_ok|empty)\b")
"""A ``masked_fill`` by a slot's validity (``~valid``, ``~chunk_ok``, ``empty``)."""


def test_every_reset_goes_through_the_reset_rule() -> None:
    sources = [*ENGINES.glob("*.py"), *(ENGINES / "csrc").glob("*.[ch]*")]
    elsewhere = [f"{path.relative_to(CELLS)}:{number}: {line.strip()}"
                 for path in sorted(sources) if path not in RESET_HELPERS
                 for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if "masked_fill" in line and not VALIDITY.search(line)]
    assert not elsewhere, ("a masked_fill outside the reset rule (rlmem/cells/resets.py, "
                           "csrc/reset.h); apply a reset through reset_where or cut_gradient:\n"
                           + "\n".join(elsewhere))

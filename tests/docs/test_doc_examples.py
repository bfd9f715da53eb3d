"""The site's Python examples run as written (as ``tests/test_readme.py`` runs the README's).

A block that the README holds too (the same code, whitespace aside) is run there, once; it runs
here as soon as the README no longer holds it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from locations import REPO

PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)


def words(code: str) -> str:
    """``code`` with its whitespace normalised, to compare blocks."""
    return " ".join(code.split())


README_BLOCKS = {words(block)
                 for block in PYTHON_BLOCK.findall((REPO / "README.md").read_text("utf-8"))}
"""The README's Python blocks, which ``tests/test_readme.py`` runs."""

BLOCKS = [(page, block) for page in sorted((REPO / "docs").rglob("*.md"))
          for block in PYTHON_BLOCK.findall(page.read_text(encoding="utf-8"))]
"""Every ``python`` code block of the site's pages, with its page."""


def test_the_site_has_examples() -> None:
    assert {page.name for page, _ in BLOCKS} >= {"cells.md", "sb3.md"}


@pytest.mark.parametrize(("page", "code"), [
    pytest.param(page, code, id=f"{page.relative_to(REPO)}:{index}",
                 marks=[pytest.mark.skip(reason="the README holds it: tests/test_readme.py")]
                 if words(code) in README_BLOCKS else [])
    for index, (page, code) in enumerate(BLOCKS)])
def test_python_block_runs(page: Path, code: str, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(page), "exec"), {"__name__": "__docs__"})

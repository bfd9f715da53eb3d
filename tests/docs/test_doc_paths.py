"""Every repository path and module the READMEs and the documentation site name exists.

A path is named in a code span (`` `rlmem/conf/preset/` ``), as a link's target (relative to the
page that links it), or as a word of a code block (``python benchmarks/cell_speed.py``); it is a
repository path when it starts with one of the top-level folders of :data:`FOLDERS`. A module is
named by ``python -m <module>``. Paths with a placeholder (``<name>``, ``*``, ``{a,b}``,
``${...}``) name no one file and are skipped. Moving or renaming a file then fails here, naming
the page and the stale path, instead of leaving a dead reference behind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from locations import REPO

FOLDERS = ("rlmem", "agents", "envs", "experiments", "benchmarks", "tests", "docs")
"""The top-level folders whose paths the documents name."""

PACKAGE_FOLDERS = {"rlmem.agents": "agents", "rlmem.envs": "envs", "rlmem": "rlmem",
                   "experiments": "experiments"}
"""Where ``python -m`` finds a module's package (``setup.py``'s mapping, and the suites')."""

DOCUMENTS = sorted([REPO / "README.md", REPO / "experiments" / "README.md",
                    *(REPO / "docs").rglob("*.md")])
"""The README, the suites' README and every page of the site."""

CODE_SPAN = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)
PATH = re.compile(rf"(?<![\w./:-])((?:{'|'.join(FOLDERS)})/[\w./-]*)")
"""A repository path inside a word: starts with a top-level folder and a slash."""
ELSEWHERE = {"README.md": {"tests/test_lstm.py"}}
"""Paths of other repositories that a document names, by document: sb3-contrib's own test
file, which ``tests/agents/test_sb3_contrib_lstm.py`` runs for every cell."""
GENERATED = {f"docs/{page}" for hook in (REPO / "docs" / "hooks").glob("*.py")
             for page in re.findall(r'^PAGE = "([^"]+)"', hook.read_text(encoding="utf-8"),
                                    flags=re.MULTILINE)}
"""The pages the build generates (each hook's ``PAGE``): they exist only in the site."""
MODULE = re.compile(r"python -m ((?:rlmem|experiments)(?:\.\w+)+)")
PLACEHOLDER = re.compile(r"[<>*{}$]")


def named_paths(text: str, folder: Path) -> set[str]:
    """The repository paths the Markdown ``text`` of a document in ``folder`` names, relative to
    the repository's root (a link's target is relative to ``folder``)."""
    fences = FENCE.findall(text)
    prose = FENCE.sub("", text)
    paths: set[str] = set()
    for span in CODE_SPAN.findall(prose):
        if not PLACEHOLDER.search(span):
            paths.update(PATH.findall(span))
    for target in LINK.findall(prose):
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target) or PLACEHOLDER.search(target):
            continue
        resolved = (folder / target.split("#", 1)[0]).resolve()
        if resolved.is_relative_to(REPO):
            paths.add(resolved.relative_to(REPO).as_posix())
    for block in fences:
        for word in block.split():
            if not PLACEHOLDER.search(word):
                paths.update(PATH.findall(word))
    return {path.rstrip(".") for path in paths}


def named_modules(text: str) -> set[str]:
    """The modules the Markdown ``text`` runs with ``python -m``."""
    return set(MODULE.findall(text))


def module_exists(module: str) -> bool:
    """Whether ``module`` is a file or package of the repository, found as Python would."""
    package = max((name for name in PACKAGE_FOLDERS
                   if module == name or module.startswith(f"{name}.")), key=len)
    rest = module.removeprefix(package).lstrip(".").split(".") if module != package else []
    base = REPO / PACKAGE_FOLDERS[package] / Path(*rest) if rest else REPO / PACKAGE_FOLDERS[
        package]
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def test_the_documents_are_found() -> None:
    assert REPO / "README.md" in DOCUMENTS
    assert "docs/reference/configuration.md" in GENERATED
    assert REPO / "docs" / "index.md" in DOCUMENTS


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_named_path_exists(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    missing = sorted(path for path in named_paths(text, document.parent)
                     if not (REPO / path).exists() and path not in GENERATED
                     and path not in ELSEWHERE.get(document.relative_to(REPO).as_posix(), ()))
    assert not missing, f"{document.relative_to(REPO)} names paths that do not exist: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(REPO)))
def test_every_module_run_exists(document: Path) -> None:
    missing = sorted(module for module in named_modules(document.read_text(encoding="utf-8"))
                     if not module_exists(module))
    assert not missing, (f"{document.relative_to(REPO)} runs modules that do not exist: "
                         f"{missing}")


def test_the_scanner_finds_each_kind_of_reference() -> None:
    text = ("See `rlmem/cells/lstm.py`, [results](../experiments/memory/RESULTS.md), "
            "[a page](rl.md#sweeps) and `rlmem/cells/<name>.py`.\n\n```bash\n"
            "python benchmarks/cell_speed.py --check\npython -m experiments.memory.suite\n```\n")
    paths = named_paths(text, REPO / "docs")
    assert paths == {"rlmem/cells/lstm.py", "experiments/memory/RESULTS.md", "docs/rl.md",
                     "benchmarks/cell_speed.py"}
    assert named_modules(text) == {"experiments.memory.suite"}
    assert module_exists("experiments.memory.suite") and module_exists("rlmem.agents.sb3")
    assert module_exists("rlmem.train") and not module_exists("rlmem.no_such_module")

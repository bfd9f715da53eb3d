"""MkDocs hook: the suites' results on the site, read from ``experiments/`` at every build.

The results (``experiments/<suite>/RESULTS.md``) live beside the run data they are built from,
and ``aggregate`` rewrites them there; copies in ``docs/`` would drift. So the site takes them
from the repository as it builds: every page that ``mkdocs.yml``'s ``nav`` names under
``experiments/`` is published at that same path (``experiments/memory/RESULTS.md`` in the
repository is ``experiments/memory/RESULTS/`` in the site), and with it every file under
``experiments/`` that a published page links or shows (its figures, the analyses beside it), the
linked pages kept out of the navigation. Since each file keeps its repository path, the pages'
relative links and images work unchanged; ``repo_links.py`` points the links that leave the
published files (to the library's source, ``experiments/<suite>/suite.py``) at the repository,
and the links to ``docs/`` at the site's pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel

REPO = Path(__file__).resolve().parents[2]
"""The repository's root."""

FOLDER = "experiments"
"""The repository folder whose pages and figures the site publishes."""

TARGET = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
"""An inline Markdown link or image: its target."""


def nav_paths(nav: Any) -> Iterator[str]:
    """Every page path that a ``nav`` of ``mkdocs.yml`` names, at any depth."""
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_paths(value)
    elif isinstance(nav, list):
        for entry in nav:
            yield from nav_paths(entry)


def linked_files(page: Path, repo: Path) -> set[str]:
    """The files under :data:`FOLDER` that the Markdown ``page`` links or shows, as paths
    relative to ``repo`` (URLs, anchors and files elsewhere are left out)."""
    found: set[str] = set()
    for target in TARGET.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:|#|/", target):
            continue
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if path.is_file() and path.is_relative_to(repo / FOLDER):
            found.add(path.relative_to(repo).as_posix())
    return found


def published(pages: list[str], repo: Path) -> dict[str, bool]:
    """The files the site takes from ``repo``: each of ``pages`` (which must exist) and, page by
    page, every file under :data:`FOLDER` they link, with whether it is one of ``pages``.

    Raises:
        FileNotFoundError: one of ``pages`` is not a file of ``repo``.
    """
    missing = [page for page in pages if not (repo / page).is_file()]
    if missing:
        raise FileNotFoundError(f"mkdocs.yml's nav names {missing}, which are not files of the "
                                f"repository")
    files = dict.fromkeys(pages, True)
    queue = list(pages)
    while queue:
        for linked in sorted(linked_files(repo / queue.pop(), repo)):
            if linked not in files:
                files[linked] = False
                if linked.endswith(".md"):
                    queue.append(linked)
    return files


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the published files to the site, the linked pages out of the navigation."""
    pages = [path for path in nav_paths(config.nav) if path.startswith(f"{FOLDER}/")]
    for path, in_nav in published(pages, REPO).items():
        files.append(File.generated(
            config, path, abs_src_path=str(REPO / path),
            inclusion=InclusionLevel.UNDEFINED if in_nav else InclusionLevel.NOT_IN_NAV))
    return files

"""MkDocs hook: links from a page to a file of the repository outside ``docs/``.

The pages link the repository's own files (``[RESULTS.md](../experiments/memory/RESULTS.md)``)
by their path from the page, so the links work where the Markdown is read in the repository.
MkDocs builds only ``docs/`` and what the hooks add, so this hook rewrites each such link:

- to a file the site publishes at its repository path (``results_pages.py``: the suites'
  results and their figures), the link points at that page of the site;
- to any other file, it checks that the file exists (a missing one is logged as a warning, which
  fails a strict build) and points the link at the file on the repository's host when
  ``mkdocs.yml`` sets ``repo_url``; without one (there is none yet) the link becomes its text,
  followed by the path as code.

A published page (which lives outside ``docs/``) is rewritten too, its links to ``docs/``
pointed at the site's pages.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

LINK = re.compile(r"(?<!!)\[([^\]]+)\]\(([^)\s]+)\)")
"""An inline Markdown link (not an image): its text and its target."""

FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
"""A fenced code block, whose text is left alone."""

LOG = logging.getLogger("mkdocs.plugins.rlmem.repo_links")
"""Warnings here fail a strict build."""


def repo_file(target: str, page_path: Path, repo: Path) -> Path | None:
    """The repository path that a link ``target`` on the page at ``page_path`` names; None for a
    URL, an anchor, or a path outside ``repo``."""
    if re.match(r"[a-z][a-z0-9+.-]*:|#|/", target):
        return None
    resolved = (page_path.parent / target.split("#", 1)[0]).resolve()
    return resolved.relative_to(repo) if resolved.is_relative_to(repo) else None


def site_path(path: Path, docs: Path, in_site: Callable[[str], bool]) -> str | None:
    """Where the repository file ``path`` is in the site (relative to its root): a page of
    ``docs`` (a folder of the repository), or a file published at its own path; None if the
    site holds neither."""
    if path.is_relative_to(docs):
        return path.relative_to(docs).as_posix()
    return path.as_posix() if in_site(path.as_posix()) else None


def rewrite(markdown: str, page_path: Path, docs_dir: Path, repo: Path,
            repo_url: str | None, page_uri: str | None = None,
            in_site: Callable[[str], bool] = lambda path: False) -> str:
    """``markdown`` of the page at ``page_path`` (``page_uri`` in the site; by default its path
    in ``docs_dir``) with each link that leaves ``docs_dir``, or comes from outside it, pointed at
    the site's copy (``in_site`` says which repository paths the site publishes), else at
    ``repo_url`` (or made plain text), warning about files that do not exist."""
    docs = docs_dir.resolve().relative_to(repo)
    in_docs = page_path.resolve().is_relative_to(docs_dir.resolve())
    uri = page_uri if page_uri is not None else page_path.resolve().relative_to(
        docs_dir.resolve()).as_posix()

    def replace(match: re.Match[str]) -> str:
        text, target = match.groups()
        path = repo_file(target, page_path, repo)
        if path is None or (in_docs and path.is_relative_to(docs)):
            return match.group(0)
        site = site_path(path, docs, in_site)
        if site is not None:
            anchor = target[len(target.split("#", 1)[0]):]
            return f"[{text}]({posixpath.relpath(site, posixpath.dirname(uri) or '.')}{anchor})"
        if not (repo / path).exists():
            LOG.warning("%s links %s, which is not in the repository", page_path.name, path)
        if repo_url:
            return f"[{text}]({repo_url.rstrip('/')}/blob/main/{path.as_posix()})"
        return text if text.strip("`") == path.as_posix() else f"{text} (`{path.as_posix()}`)"

    parts: list[str] = []
    last = 0
    for fence in FENCE.finditer(markdown):
        parts += [LINK.sub(replace, markdown[last:fence.start()]), fence.group(0)]
        last = fence.end()
    parts.append(LINK.sub(replace, markdown[last:]))
    return "".join(parts)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files,
                     **kwargs: Any) -> str:
    """Rewrite the page's links to repository files (generated pages have no such links)."""
    if page.file.abs_src_path is None:
        return markdown
    docs_dir = Path(config.docs_dir)
    return rewrite(markdown, Path(page.file.abs_src_path), docs_dir, docs_dir.resolve().parent,
                   config.repo_url, page_uri=page.file.src_uri,
                   in_site=lambda path: files.get_file_from_path(path) is not None)

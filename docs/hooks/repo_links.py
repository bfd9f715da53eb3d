"""MkDocs hook: links from a page to a file of the repository outside ``docs/``.

The pages link the repository's own files (``[RESULTS.md](../experiments/memory/RESULTS.md)``)
by their path from the page, so the links work where the Markdown is read in the repository.
MkDocs builds only ``docs/``, so such a link would be broken in the site. This hook checks that
the file exists (a missing one is logged as a warning, which fails a strict build) and points the
link at the file on the repository's host when ``mkdocs.yml`` sets ``repo_url``; without one
(there is none yet) the link becomes its text, followed by the path as code.
"""

from __future__ import annotations

import logging
import re
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


def repo_file(target: str, page_path: Path, docs_dir: Path, repo: Path) -> Path | None:
    """The repository path a link ``target`` on the page at ``page_path`` names, when it leaves
    ``docs_dir``; None for a URL, an anchor, or a page of the site."""
    if re.match(r"[a-z][a-z0-9+.-]*:|#|/", target):
        return None
    resolved = (page_path.parent / target.split("#", 1)[0]).resolve()
    if resolved.is_relative_to(docs_dir.resolve()) or not resolved.is_relative_to(repo):
        return None
    return resolved.relative_to(repo)


def rewrite(markdown: str, page_path: Path, docs_dir: Path, repo: Path,
            repo_url: str | None) -> str:
    """``markdown`` with each link to a repository file outside ``docs_dir`` pointed at
    ``repo_url`` (or made plain text), warning about files that do not exist."""

    def replace(match: re.Match[str]) -> str:
        text, target = match.groups()
        path = repo_file(target, page_path, docs_dir, repo)
        if path is None:
            return match.group(0)
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
                   config.repo_url)

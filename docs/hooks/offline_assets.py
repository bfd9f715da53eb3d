"""MkDocs hook: the scripts and styles the pages load, served from the site itself.

The site is read offline (a folder of HTML opened from disk, a machine without a network), so no
page loads anything from a CDN:

- **MathJax** renders the equations (``pymdownx.arithmatex`` marks them). Its files come from the
  ``django-static-mathjax`` distribution (import name ``mathjax``), a copy of MathJax 3 on PyPI
  with no dependencies (Django is not needed to read its files), kept by MIT's PhysioNet; the
  ``docs`` extra installs it, so ``pip`` is the one tool a build needs (no npm, nothing fetched
  at build or view time). This hook copies :data:`MATHJAX_FILES` into ``mathjax/`` of the site:
  the ``tex-chtml`` component that ``mkdocs.yml`` loads and the folders it loads from on
  demand (its fonts, the TeX extensions that ``\\require`` or autoload name, the menu and its
  accessibility tools), not MathJax's other combined components.
- **Code colours** come from Pygments at build time (``pymdownx.highlight``), in place of the
  theme's highlight.js, which it loads from a CDN: this hook writes Pygments' style sheet as
  ``css/pygments.css``.

``mkdocs.yml`` names both (``extra_javascript``, ``extra_css``); the site's test
(``tests/docs/test_built_site.py``) checks that every script and style sheet a page loads is a
file of the site.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import mathjax
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from pygments.formatters import HtmlFormatter

MATHJAX_ROOT = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
"""MathJax's browser build, as the distribution installs it."""

MATHJAX_FILES = ("tex-chtml.js", "output/chtml/fonts", "input/tex/extensions", "ui", "a11y",
                 "sre")
"""What the site serves of :data:`MATHJAX_ROOT`: the component the pages load, and the folders
it loads from (relative to its own address) when a page or a reader asks for more."""

SITE_FOLDER = "mathjax"
"""Where MathJax's files sit in the site (``mathjax/tex-chtml.js``)."""

PYGMENTS_CSS = "css/pygments.css"
"""Where the code colours' style sheet sits in the site."""


def mathjax_files(root: Path = MATHJAX_ROOT) -> Iterator[tuple[str, Path]]:
    """Each file of :data:`MATHJAX_FILES` under ``root``: its path in the site, and on disk.

    Raises:
        FileNotFoundError: one is missing (MathJax is not installed, or a release moved it).
    """
    for name in MATHJAX_FILES:
        path = root / name
        if not path.exists():
            raise FileNotFoundError(
                f"{path} does not exist: the site serves MathJax from the django-static-mathjax "
                "distribution; install the documentation's tools with pip install -e '.[docs]'")
        for file in sorted([path] if path.is_file() else path.rglob("*")):
            if file.is_file():
                yield f"{SITE_FOLDER}/{file.relative_to(root).as_posix()}", file


def pygments_css() -> str:
    """Pygments' default colours for the code blocks ``pymdownx.highlight`` marks up."""
    return str(HtmlFormatter(style="default").get_style_defs(".highlight"))


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add MathJax's files and the code colours to the site."""
    for uri, path in mathjax_files():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    files.append(File.generated(config, PYGMENTS_CSS, content=pygments_css()))
    return files

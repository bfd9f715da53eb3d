"""The documentation site, as built, reads well offline: its tables fit the page, its equations
render from files of the site, and the suites' results are pages of it.

The site is built here, strictly, into a temporary folder (``mkdocs build --strict``, as CI
does; about 10 s). The checks read the HTML; where Chromium is installed, a headless browser
also lays out the pages with the most and widest tables at 1,280 px, without a network, and
measures them (skipped where it is not: Debian's ``chromium`` package).
"""

from __future__ import annotations

import html
import json
import posixpath
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from locations import REPO

PAGES_WITH_TABLES = ("reference/configuration", "reference/presets", "cells",
                     "experiments/supervised/RESULTS")
"""The pages the browser lays out: the most and the widest tables, and equations in them."""

ASSET = re.compile(r'<script[^>]*\bsrc="([^"]+)"|<link[^>]*\brel="stylesheet"[^>]*\bhref="([^"]+)"'
                   r'|<link[^>]*\bhref="([^"]+)"[^>]*\brel="stylesheet"')
"""A script or style sheet a page loads: its address."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly from the working tree."""
    folder = tmp_path_factory.mktemp("site")
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                             str(folder)], cwd=REPO, capture_output=True, text=True, timeout=600,
                            check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return folder


def pages(site: Path) -> list[Path]:
    """Every HTML page of the site."""
    found = sorted(site.rglob("*.html"))
    assert len(found) > 20
    return found


def assets(page: Path) -> list[str]:
    """The addresses of the scripts and style sheets ``page`` loads, in order."""
    return [next(group for group in match if group)
            for match in ASSET.findall(page.read_text(encoding="utf-8"))]


def test_every_script_and_style_sheet_is_a_file_of_the_site(site: Path) -> None:
    for page in pages(site):
        for address in assets(page):
            where = f"{page.relative_to(site)} loads {address}"
            assert not re.match(r"[a-z]+:|//", address), f"{where}: not from the site"
            # 404.html, which a server shows at any depth, names them from the site's root.
            base = site if address.startswith("/") else page.parent
            assert (base / address.split("?", 1)[0].lstrip("/")).resolve().is_file(), where


def test_the_equations_are_rendered_by_the_sites_own_mathjax(site: Path) -> None:
    cells = site / "cells" / "index.html"
    assert cells.read_text(encoding="utf-8").count('class="arithmatex"') > 20
    scripts = assets(cells)
    mathjax = [address for address in scripts if address.endswith("tex-chtml.js")]
    assert mathjax, scripts
    root = (cells.parent / mathjax[0]).resolve().parent
    # What the component loads by itself: the fonts its CHTML output is drawn with.
    assert list((root / "output" / "chtml" / "fonts" / "woff-v2").glob("MathJax_Main-*.woff"))
    # The configuration (which marks arithmatex's spans) runs before MathJax.
    assert scripts.index("../javascripts/mathjax.js") < scripts.index(mathjax[0])


def test_table_cells_wrap_after_the_themes_rule(site: Path) -> None:
    """The theme's ``white-space: nowrap`` on table cells is overridden by a style sheet that
    every page loads after the theme's."""
    theme = (site / "css" / "theme.css").read_text(encoding="utf-8")
    assert re.search(r"\.wy-table-responsive table td,\.wy-table-responsive table th"
                     r"\{white-space:nowrap\}", theme), "the theme's rule changed: recheck"
    ours = re.sub(r"/\*.*?\*/", "", (site / "css" / "tables.css").read_text(encoding="utf-8"),
                  flags=re.DOTALL)
    rule = re.search(r"\.wy-table-responsive table td,\s*\.wy-table-responsive table th[^{]*"
                     r"\{([^}]*)\}", ours)
    assert rule and re.search(r"white-space:\s*normal", rule.group(1))
    for page in pages(site):
        if page.name == "index.html" and "<table" in page.read_text(encoding="utf-8"):
            sheets = [posixpath.basename(address) for address in assets(page)]
            assert sheets.index("theme.css") < sheets.index("tables.css"), page


def test_the_suites_results_are_pages_with_their_figures(site: Path) -> None:
    nav = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    results = re.findall(r"experiments/\w+/RESULTS\.md", json.dumps(nav))
    assert len(results) >= 4
    for result in results:
        page = site / result.removesuffix(".md") / "index.html"
        text = page.read_text(encoding="utf-8")
        assert "<table" in text, result
        for image in re.findall(r'<img[^>]*\bsrc="([^"]+)"', text):
            assert (page.parent / image).resolve().is_file(), f"{result} shows {image}"
    linking = (site / "rl" / "index.html").read_text(encoding="utf-8")
    assert 'href="../experiments/memory/RESULTS/"' in linking


def test_the_cli_page_shows_no_internal_objects(site: Path) -> None:
    text = (site / "api" / "cli" / "index.html").read_text(encoding="utf-8")
    objects = re.findall(r'id="(rlmem\.\w+\.\w+)"', text)
    assert "rlmem.evaluate.evaluate_run" in objects
    constants = [name for name in objects
                 if re.fullmatch(r"[A-Z][A-Z0-9_]*", name.rsplit(".", 1)[-1])]
    assert not constants, constants


PROBE = """<script>
const typeset = () => (window.MathJax && MathJax.startup && MathJax.startup.promise)
  || Promise.resolve();
const settled = () => new Promise(done => setTimeout(done, 1000));
window.addEventListener("load", () => document.fonts.ready.then(typeset).then(settled).then(() => {
    const width = document.documentElement.clientWidth;
    const tables = [...document.querySelectorAll(".rst-content table")];
    const wide = tables.filter(table => {
      const box = table.closest(".wy-table-responsive");
      // The theme makes the table itself a block that scrolls (theme_extra.css), inside a box
      // that scrolls too (theme.js's wrapper): either scrolling hides part of the table.
      return table.getBoundingClientRect().right > width
        || table.scrollWidth > table.clientWidth
        || (box !== null && box.scrollWidth > box.clientWidth);
    }).map(table => table.rows[0].textContent.trim().slice(0, 80));
    const out = document.createElement("pre");
    out.id = "probe";
    out.textContent = JSON.stringify({
      width, tables: tables.length, wide,
      sideways: document.documentElement.scrollWidth - width,
      equations: document.querySelectorAll("mjx-container").length,
      raw: [...document.querySelectorAll(".arithmatex")]
        .filter(span => span.querySelector("mjx-container") === null).length});
    document.body.appendChild(out);
  }));
</script>"""
"""Appended to a copy of a page: once its scripts have run (the theme wraps the tables), its fonts
are loaded and MathJax has typeset, it writes what it measured into the page."""


def laid_out(page: Path) -> dict[str, object]:
    """What :data:`PROBE` measures on ``page``, laid out by headless Chromium at 1,280 px."""
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", f"{PROBE}</body>"),
                     encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [str(shutil.which("chromium")), "--headless", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--window-size=1280,2000",
             "--virtual-time-budget=20000", "--dump-dom", probe.as_uri()],
            capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r'<pre id="probe">(.*?)</pre>', result.stdout, flags=re.DOTALL)
    assert found, f"chromium measured nothing on {page}: {result.stderr[-2000:]}"
    measured: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return measured


@pytest.mark.skipif(shutil.which("chromium") is None,
                    reason="no chromium (Debian's chromium package) to lay the pages out")
@pytest.mark.parametrize("name", PAGES_WITH_TABLES)
def test_in_a_browser_no_table_is_wider_than_the_page(site: Path, name: str) -> None:
    measured = laid_out(site / name / "index.html")
    assert 1200 <= int(str(measured["width"])) <= 1280  # the window, less a scrollbar
    assert int(str(measured["tables"])) > 0
    assert measured["wide"] == [], f"{name}: tables wider than the page: {measured['wide']}"
    assert measured["sideways"] == 0, f"{name}: the page scrolls sideways"
    assert measured["raw"] == 0, f"{name}: equations left as TeX"

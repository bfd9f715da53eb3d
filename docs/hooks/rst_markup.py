"""Griffe extension: the reStructuredText markup of rlmem's docstrings, as Markdown.

The docstrings are Google-style with Sphinx's roles (``:class:`~rlmem.cells.LSTM```) and
``.. math::`` blocks, which Markdown would print verbatim. Before mkdocstrings renders a
docstring, this rewrites, on the text alone (the source is untouched):

- a role ``:class:`~a.b.C``` (any of class, func, meth, attr, data, mod) as the code span
  ``C`` (``~`` keeps the last name, as in Sphinx), and ``:math:`x``` as ``\\(x\\)``;
- a ``.. math::`` block as a ``$$`` block (``aligned`` when it has ``&`` or line breaks, as
  Sphinx wraps it), which pymdownx.arithmatex hands to MathJax;
- a simple table (columns under ``====  ====`` borders) as a Markdown table;
- an ``Args:`` entry that names several arguments at once (``a, b, c: as in sb3-contrib.``),
  which the Google style cannot parse, as a paragraph before the section.

Roles become code, not links: many name private modules that the reference leaves out, and a
link that does not resolve would fail the strict build.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|obj|exc):`(~?)([^`]+)`")
"""A Sphinx cross-reference role: ``~`` and the target."""

MATH_ROLE = re.compile(r":math:`([^`]+)`")
"""An inline math role."""

TABLE_BORDER = re.compile(r"^(\s*)=+(?: +=+)+\s*$")
"""A border of a reStructuredText simple table: runs of ``=`` separated by spaces."""

MATH_BLOCK = re.compile(r"^(\s*)\.\. math::\s*(.*)$")
"""The first line of a math directive: its indentation and any math on the same line."""


def role_as_code(match: re.Match[str]) -> str:
    """A cross-reference role as a code span: the last name with ``~``, else the whole target."""
    shorten, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if shorten else target}`"


def math_block(indent: str, lines: list[str]) -> list[str]:
    """The lines of a ``$$`` block at ``indent`` holding ``lines`` (dedented math)."""
    body = [line for line in lines if line.strip()]
    if any("&" in line or line.rstrip().endswith("\\\\") for line in body):
        body = ["\\begin{aligned}", *body, "\\end{aligned}"]
    return ["", *(f"{indent}{line}" for line in ["$$", *body, "$$"]), ""]


def shared_arguments(lines: list[str]) -> list[str]:
    """``lines`` with each ``Args:`` entry that names several arguments moved out of the
    section, into a paragraph before it (the entry's text, dedented)."""
    out: list[str] = []
    index = 0
    while index < len(lines):
        out.append(lines[index])
        header = re.match(r"^(\s*)Args:\s*$", lines[index])
        index += 1
        if not header:
            continue
        section_at = len(out) - 1
        moved: list[str] = []
        item_indent: int | None = None
        while index < len(lines) and (not lines[index].strip() or len(lines[index])
                                      - len(lines[index].lstrip()) > len(header.group(1))):
            line = lines[index]
            depth = len(line) - len(line.lstrip())
            item_indent = depth if item_indent is None and line.strip() else item_indent
            if line.strip() and depth == item_indent and re.match(r"\w+,", line.strip()):
                moved.append(line.strip())
                index += 1
                while (index < len(lines) and lines[index].strip()
                       and len(lines[index]) - len(lines[index].lstrip()) > depth):
                    moved.append(lines[index].strip())
                    index += 1
                continue
            out.append(line)
            index += 1
        if moved:
            out[section_at:section_at] = [f"{header.group(1)}{' '.join(moved)}", ""]
    return out


def table_cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    """The cells of one row of a simple table whose columns are ``spans`` (the last column runs
    to the end of the line)."""
    cells = [line[start:end].strip() for start, end in spans[:-1]]
    return [*cells, line[spans[-1][0]:].strip()]


def simple_tables(lines: list[str]) -> list[str]:
    """``lines`` with each reStructuredText simple table (a border, a header, a border, rows,
    a border) as a Markdown table at the same indentation. A row that does not start in the
    first column continues the cells of the row above."""
    out: list[str] = []
    index = 0
    while index < len(lines):
        border = TABLE_BORDER.match(lines[index])
        closing = index + 2
        if not (border and closing < len(lines) and TABLE_BORDER.match(lines[closing])):
            out.append(lines[index])
            index += 1
            continue
        spans = [match.span() for match in re.finditer(r"=+", lines[index])]
        end = closing + 1
        while end < len(lines) and not TABLE_BORDER.match(lines[end]):
            end += 1
        rows: list[list[str]] = []
        for line in lines[closing + 1:end]:
            if not line.strip():
                continue
            cells = table_cells(line, spans)
            if rows and not cells[0]:
                rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells,
                                                                       strict=True)]
            else:
                rows.append(cells)
        indent = border.group(1) if border else ""
        header = table_cells(lines[index + 1], spans)
        out += ["", *(f"{indent}| {' | '.join(cells)} |" for cells in
                      [header, ["---"] * len(spans), *rows]), ""]
        index = end + 1
    return out


def convert(text: str) -> str:
    """``text`` (a docstring) with its reStructuredText roles and math blocks as Markdown."""
    lines = simple_tables(shared_arguments(text.splitlines()))
    out: list[str] = []
    index = 0
    while index < len(lines):
        match = MATH_BLOCK.match(lines[index])
        if not match:
            out.append(lines[index])
            index += 1
            continue
        indent, first = match.groups()
        block = [first] if first else []
        index += 1
        while index < len(lines) and (not lines[index].strip()
                                      or len(lines[index]) - len(lines[index].lstrip())
                                      > len(indent)):
            block.append(lines[index].strip())
            index += 1
        while block and not block[-1]:
            block.pop()
        out.extend(math_block(indent, block))
    converted = "\n".join(out)
    converted = MATH_ROLE.sub(lambda m: f"\\({m.group(1)}\\)", converted)
    return ROLE.sub(role_as_code, converted)


class RstMarkup(griffe.Extension):
    """Rewrite every docstring with :func:`convert` as griffe loads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Convert ``obj``'s docstring, before anything parses it."""
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)

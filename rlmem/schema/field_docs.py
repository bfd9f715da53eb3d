"""The description of every config key, read once from where it is written.

A config dataclass documents each field with the string literal after it (an attribute
docstring, as Sphinx reads them); :func:`field_docs` reads those with :mod:`ast` from the
class's source, base classes first, so ``--help`` and the error messages show the same words
as the code, and no second list of descriptions can drift from it. A cell's config is derived
from its constructor (:func:`rlmem.cells.cell_config`) and has no source of its own: its keys
are described by the ``Args:`` section of the cell's docstring, and the sizes every cell shares
by :func:`rlmem.cells.make_cell`'s (:func:`cell_docs`).
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import re
import textwrap
from typing import Any

from rlmem.cells import get_cell_class, make_cell


@functools.cache
def raw_field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of dataclass ``cls`` and its bases (a subclass's own win), by
    field name, as written (:func:`inspect.cleandoc`: reST and line breaks kept, for the docs
    site); a field without one is absent. Classes without source (made at run time) give none.
    The mapping is shared: copy it before changing it."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        tree = ast.parse(source)
        body = next((node.body for node in tree.body if isinstance(node, ast.ClassDef)), [])
        for node, following in itertools.pairwise(body):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """:func:`raw_field_docs`, each on one line (:func:`one_line`), for ``--help`` and the
    error messages."""
    return {key: one_line(text) for key, text in raw_field_docs(cls).items()}


_ROLE = re.compile(r":\w+:`(~?)([^`]*)`")


def one_line(text: str) -> str:
    """``text`` with its whitespace and line breaks collapsed, reST's roles as their target
    (``:class:`~rlmem.cells.LSTM``` as ``LSTM``) and its double backquotes made single."""
    plain = _ROLE.sub(lambda match: (match.group(2).rsplit(".", 1)[-1] if match.group(1)
                                     else match.group(2)), text)
    return " ".join(plain.replace("``", "`").split())


_ARG = re.compile(r"^(\s*)(\w+)(?: \([^)]*\))?:\s*(.*)$")


def args_section(doc: str | None) -> dict[str, str]:
    """The entries of the ``Args:`` section of a Google-style docstring, each on one line."""
    entries: dict[str, str] = {}
    if not doc:
        return entries
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = next(index for index, line in enumerate(lines) if line.strip() == "Args:")
    except StopIteration:
        return entries
    indent: int | None = None
    current: str | None = None
    for line in lines[start + 1:]:
        if line.strip() and not line.startswith(" "):
            break  # the next section
        match = _ARG.match(line)
        depth = len(line) - len(line.lstrip())
        if match and (indent is None or depth == indent):
            indent = depth
            current = match.group(2)
            entries[current] = match.group(3)
        elif current is not None and line.strip():
            entries[current] += " " + line.strip()
    return {key: one_line(value) for key, value in entries.items()}


@functools.cache
def cell_docs(name: str) -> dict[str, str]:
    """The description of each key of ``memory=<name>``: the cell's ``Args:`` (class or
    ``__init__`` docstring), and :func:`~rlmem.cells.make_cell`'s for the sizes of a stack."""
    docs = {key: value for key, value in args_section(make_cell.__doc__).items()
            if key in ("hidden_size", "num_layers", "dropout")}
    docs["name"] = "the registered cell"
    cls: Any = get_cell_class(name)
    docs.update(args_section(cls.__doc__))
    docs.update(args_section(cls.__init__.__doc__))
    return docs

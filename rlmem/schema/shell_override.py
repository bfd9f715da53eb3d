"""An override as a user types it: ``key=value`` quoted for both the shell and Hydra.

rlmem prints commands to run next (``python -m rlmem.evaluate run=<run directory>``), and a
run's default folder names the settings it differs by (``gru,flush_denormal=true``): Hydra
reads ``,`` in an override's value as a list and ``=`` as an error, and the shell splits on a
space. A value of only plain characters is printed as it is; any other is quoted for Hydra
(``key='value'``) and that for the shell, so that the command runs when pasted.
"""

from __future__ import annotations

import re
import shlex

PLAIN = re.compile(r"[\w./+:@%-]+")
"""Characters Hydra reads in an unquoted value and no shell treats specially."""

SHELL_SPECIAL_IN_DOUBLE_QUOTES = frozenset('"$`\\!')
"""Characters a shell still reads inside double quotes."""


def override(key: str, value: str) -> str:
    """``key=value`` as one argument that a POSIX shell passes and Hydra parses back to
    ``value`` exactly."""
    if PLAIN.fullmatch(value):
        return f"{key}={value}"
    literal = value.replace("${", "\\${")  # "${" would start an interpolation
    argument = f"{key}={hydra_quoted(literal)}"
    if SHELL_SPECIAL_IN_DOUBLE_QUOTES.isdisjoint(argument):
        return f'"{argument}"'
    return shlex.quote(argument)


def hydra_quoted(value: str) -> str:
    """``value`` as Hydra's quoted string, which it parses back to ``value`` (an interpolation
    in it, ``${...}``, stays one): a quote or a run of backslashes before one is escaped with
    a backslash."""
    return "'" + re.sub(r"(\\*)'", lambda match: match.group(1) * 2 + "\\'", value) + "'"

"""Reading a run's ``progress.csv`` for reports and figures, naming the file, the line and the
column when it is not what rlmem writes.

A run killed mid-row, a disk that filled up, or a hand edit leaves a row with blank or
garbled fields; ``float(row["frames"])`` then fails with a bare ``ValueError`` or
``KeyError: 'frames'`` that names no file, in a report over hundreds of runs. Every reader of
``progress.csv`` outside the logger goes through :func:`read_progress` and
:meth:`ProgressRow.number` instead.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from rlmem.runs.logger import CorruptProgressError

READ_ONLY = ("It was only read: nothing was changed. Fix or delete that row (or the file), "
             "then run this again.")
"""What a failed read leaves, and what to do."""


@dataclass(frozen=True)
class ProgressRow:
    """One row of a ``progress.csv``, which knows where it comes from."""

    path: Path
    line: int
    """The row's line in the file (the header is line 1)."""
    values: Mapping[str, str]

    def has(self, key: str) -> bool:
        """Whether the row holds a (non-blank) value for ``key``."""
        return self.values.get(key) not in (None, "")

    def number(self, key: str, default: float | None = None) -> float:
        """Column ``key`` as a number; ``default`` where the row leaves it blank or the file has
        no such column (without a default, that is an error too).

        Raises:
            CorruptProgressError: naming the file, the line and the column.
        """
        value = self.values.get(key)
        if value in (None, ""):
            if default is not None:
                return default
            what = "has no column" if key not in self.values else "leaves blank the column"
            raise CorruptProgressError(f"{self.path}, line {self.line}: the row {what} "
                                       f"{key!r}. {READ_ONLY}")
        try:
            return float(str(value))
        except ValueError:
            raise CorruptProgressError(
                f"{self.path}, line {self.line}: column {key!r} holds {value!r}, which is no "
                f"number. {READ_ONLY}") from None

    def finite(self, key: str) -> float | None:
        """Column ``key`` as a finite number, or None where it is blank, NaN or infinite."""
        value = self.number(key, math.nan)
        return value if math.isfinite(value) else None


def read_progress(path: Path) -> list[ProgressRow]:
    """The rows of ``path``, a ``progress.csv``.

    Raises:
        CorruptProgressError: the file cannot be read as a CSV with a header, or a row has
            another number of fields than the header; the message names the file and the line.
    """
    try:
        with path.open(newline="") as file:
            reader = csv.DictReader(file)
            rows = []
            for values in reader:
                # DictReader keeps a row's extra fields under None, and gives a row cut short
                # None for its missing fields; rlmem writes every field (blank as "").
                if None in values or None in values.values():
                    header = len(reader.fieldnames or [])
                    missing = sum(value is None for value in values.values())
                    fields = header - missing + len(values.get(None) or [])
                    raise CorruptProgressError(
                        f"{path}, line {reader.line_num}: the row has {fields} fields where the "
                        f"header has {header} (a row cut short, or garbled). {READ_ONLY}")
                rows.append(ProgressRow(path, reader.line_num, values))
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise CorruptProgressError(f"{path} cannot be read as a CSV ({type(error).__name__}: "
                                   f"{error}). {READ_ONLY}") from error
    return rows

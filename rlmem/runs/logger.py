"""One row per update, to ``progress.csv`` and to TensorBoard."""

from __future__ import annotations

import csv
import io
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from torch.utils.tensorboard import SummaryWriter

from rlmem.runs.errors import RunDirectoryError, RunError
from rlmem.runs.files import append_text, write_atomic


class CorruptProgressError(RunError):
    """A run's ``progress.csv`` is not a log rlmem could have written."""


def _csv_line(values: Sequence[object]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer).writerow(values)  # "\r\n", as csv.DictWriter wrote every earlier log
    return buffer.getvalue()


def _is_number(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


class RunLogger:
    """Append metrics to ``<run_dir>/progress.csv`` and TensorBoard events in ``<run_dir>/tb``.

    A row is appended in one write (:func:`~rlmem.runs.files.append_text`, which follows no
    symlink); the file is rewritten, when a new column extends the header or a resumed run drops
    rows, atomically (:func:`~rlmem.runs.files.write_atomic`), so a kill at any moment leaves
    either the old file or the new one.

    Args:
        run_dir: the run directory.
        step_key: the column that orders rows (``frames`` for RL, ``iteration`` for tasks).
        resume_step: when resuming from a checkpoint taken at this step, the rows of the run that
            was killed are kept up to it and the rest dropped: rows after it, a last row cut by
            the kill, and any row that is not whole (:meth:`_kept_rows`), so that the CSV has
            each step exactly once, in order.

    Raises:
        CorruptProgressError: on resume, ``progress.csv`` has no ``step_key`` column, or a
            row holds a value that is no number (named by line and column).
        RunDirectoryError: the TensorBoard log cannot be opened (a full disk, ...).
    """

    def __init__(self, run_dir: str | os.PathLike[str], step_key: str,
                 resume_step: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.step_key = step_key
        self.csv_path = self.run_dir / "progress.csv"
        self._fields: list[str] | None = None
        if self.csv_path.exists():
            if resume_step is None:  # a fresh run; open_run moved any earlier run aside
                self.csv_path.unlink()
            else:
                self._truncate(resume_step)
        try:
            self.writer = SummaryWriter(log_dir=str(self.run_dir / "tb"),
                                        purge_step=resume_step + 1 if resume_step else None)
        except OSError as error:
            raise RunDirectoryError(
                f"cannot open the TensorBoard log in {self.run_dir / 'tb'}: {error}. Nothing was "
                "trained in this attempt; the checkpoint and progress.csv are as they were. Free "
                "some space (or make the run directory writable) and run the same command "
                "again to resume.") from error

    def _kept_rows(self, resume_step: int) -> tuple[list[str], list[list[str]]] | None:
        """The header and the rows of ``progress.csv`` that a run resumed at ``resume_step``
        keeps: whole rows (a value in every column), steps increasing, none after
        ``resume_step``; a last line without its newline was cut by a kill. None for a file
        without a whole line (a kill before its header was written): a new log.

        Raises:
            CorruptProgressError: the file has no ``step_key`` column, or a whole row holds a
                value that is no number (which no kill makes); named by line and column.
        """
        text = self.csv_path.read_text(errors="replace")
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines.pop()
        rows = list(csv.reader(lines))
        if not rows:
            return None
        header = rows[0]
        if self.step_key not in header:
            raise CorruptProgressError(
                f"{self.csv_path} has no {self.step_key!r} column (its first line is "
                f"{','.join(header)[:80]!r}), so it is not this run's log. The checkpoint is "
                "intact and nothing was written. Move the file away and run the same command "
                "again: the run resumes and starts a new progress.csv.")
        column, kept, last = header.index(self.step_key), [], -math.inf
        for line, row in enumerate(rows[1:], start=2):
            if len(row) != len(header):
                continue  # cut short, or two rows run together: no whole row to keep
            self._refuse_garbled(line, header, row)
            step = float(row[column]) if row[column] else math.nan
            if last < step <= resume_step:
                kept.append(row)
                last = step
        return header, kept

    def _refuse_garbled(self, line: int, header: list[str], row: list[str]) -> None:
        """Raise :class:`CorruptProgressError` where a whole ``row`` (at ``line``) holds a value
        that is neither empty nor a number."""
        for key, value in zip(header, row, strict=True):
            if value != "" and not _is_number(value):
                raise CorruptProgressError(
                    f"{self.csv_path}, line {line}: column {key!r} holds {value[:40]!r}, which "
                    "is no number, so the row is not one rlmem wrote. The checkpoint and this "
                    "file are as they were. Fix or delete that row, then run the same command "
                    "again to resume.")

    def _truncate(self, resume_step: int) -> None:
        kept = self._kept_rows(resume_step)
        if kept is None:
            self.csv_path.unlink()
            return
        header, rows = kept
        self._fields = header
        self._write(header, rows)

    def _write(self, header: list[str], rows: list[list[str]]) -> None:
        write_atomic(self.csv_path, "".join(_csv_line(row) for row in [header, *rows]))

    def log(self, metrics: Mapping[str, float]) -> None:
        """Write one row; ``metrics`` must contain the step key. New keys extend the header."""
        row = {key: float(value) for key, value in metrics.items()}
        step = int(row[self.step_key])
        for key, value in row.items():
            if key != self.step_key and math.isfinite(value):
                self.writer.add_scalar(key, value, step)
        fields = self._fields or []
        if self._fields is None or not set(row) <= set(fields):
            fields = [*fields, *(key for key in row if key not in fields)]
            self._rewrite_header(fields)
        append_text(self.csv_path, _csv_line([row.get(key, "") for key in fields]))

    def _rewrite_header(self, fields: list[str]) -> None:
        """Rewrite the file with the header ``fields`` (the old one extended), the rows so far
        padded with empty values."""
        rows: list[list[str]] = []
        if self.csv_path.exists():
            with self.csv_path.open(newline="") as file:
                rows = [[record.get(key) or "" for key in fields]
                        for record in csv.DictReader(file)]
        self._fields = fields
        self._write(fields, rows)

    def close(self) -> None:
        try:
            self.writer.close()
        except OSError as error:  # the rows are in progress.csv; only TensorBoard's tail is lost
            print(f"warning: could not close the TensorBoard log in {self.run_dir / 'tb'}: "
                  f"{error}", file=sys.stderr, flush=True)

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

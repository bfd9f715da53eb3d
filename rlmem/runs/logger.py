"""One row per update, to ``progress.csv`` and to TensorBoard."""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from torch.utils.tensorboard import SummaryWriter


class RunLogger:
    """Append metrics to ``<run_dir>/progress.csv`` and TensorBoard events in ``<run_dir>/tb``.

    Args:
        run_dir: the run directory.
        step_key: the column that orders rows (``frames`` for RL, ``iteration`` for tasks).
        resume_step: when resuming from a checkpoint taken at this step, rows logged after it
            (by the run that was killed) are dropped, so the CSV has each step exactly once.
    """

    def __init__(self, run_dir: str | os.PathLike[str], step_key: str,
                 resume_step: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.step_key = step_key
        self.csv_path = self.run_dir / "progress.csv"
        self._fields: list[str] | None = None
        if self.csv_path.exists():
            if resume_step is None:
                self.csv_path.unlink()
            else:
                self._truncate(resume_step)
        self.writer = SummaryWriter(log_dir=str(self.run_dir / "tb"),
                                    purge_step=resume_step + 1 if resume_step else None)

    def _truncate(self, resume_step: int) -> None:
        with self.csv_path.open(newline="") as file:
            reader = csv.DictReader(file)
            self._fields = list(reader.fieldnames or [])
            rows = [row for row in reader if float(row[self.step_key]) <= resume_step]
        with self.csv_path.open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=self._fields)
            writer.writeheader()
            writer.writerows(rows)

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
        with self.csv_path.open("a", newline="") as file:
            csv.DictWriter(file, fieldnames=fields).writerow(row)

    def _rewrite_header(self, fields: list[str]) -> None:
        rows = []
        if self.csv_path.exists():
            with self.csv_path.open(newline="") as file:
                rows = list(csv.DictReader(file))
        self._fields = fields
        with self.csv_path.open("w", newline="") as file:
            writer = csv.DictWriter(file, fieldnames=fields)
            writer.writeheader()
            writer.writerows(rows)

    def close(self) -> None:
        self.writer.close()

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

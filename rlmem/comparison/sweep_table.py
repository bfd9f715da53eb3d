"""The comparison table at the end of a sweep: ``python -m rlmem.train -m memory=lstm,gru
seed=0,1,2`` ends by printing :func:`~rlmem.comparison.table.comparison_table` of its runs.

:class:`SweepTable` is a Hydra callback (``hydra.callbacks`` of ``conf/train.yaml`` and
``conf/supervised.yaml``). Each job, in whatever process the launcher runs it, leaves its run
directory as one line in a small file of a temporary directory the sweep made; at the end of
the sweep, its own process reads them back and prints the table of the runs that have a measure.
Hydra turns a callback's exception into a warning, so a run that cannot be read never fails
the sweep; the table is skipped with a one-line note instead.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from rlmem.runs.logger import CorruptProgressError

SEED = re.compile(r"(^|[/_])seed\d+$")
"""The seed at the end of a run folder's path (``.../seed0``, ``..._seed0``)."""


def sweep_report(run_dirs: list[Path]) -> str:
    """The table of the runs in ``run_dirs`` (those that exist and hold a run), headed by how
    to draw their curves; empty when none does."""
    # Imported here, not above: every run builds this callback, and reading runs pulls in the
    # supervised tasks and matplotlib (about 0.4 s of each command's start-up); only a
    # sweep's end needs them.
    from rlmem.comparison.collection import NotARunError, group_runs, read_run
    from rlmem.comparison.table import comparison_table

    runs = []
    for path in dict.fromkeys(run_dirs):
        try:
            runs.append(read_run(path))
        except (NotARunError, CorruptProgressError):
            continue  # a job that failed before its run began
    if not runs:
        return ""
    patterns = dict.fromkeys("'" + SEED.sub(r"\1seed*", str(run.path)) + "'" for run in runs)
    return (f"The sweep's {len(runs)} runs, by setting:\n"
            f"{comparison_table(group_runs(runs))}\n"
            f"Curves and more: python -m rlmem.compare {' '.join(patterns)} --plot curves.png")


class SweepTable(Callback):
    """Print the comparison table of a sweep's runs at its end (see the module's docstring)."""

    def __init__(self) -> None:
        self.records: Path | None = None

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.records = Path(tempfile.mkdtemp(prefix="rlmem-sweep-runs-"))
        atexit.register(shutil.rmtree, self.records, ignore_errors=True)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if self.records is None:  # a single run
            return
        run_dir = OmegaConf.select(config, "run_dir")
        number = OmegaConf.select(config, "hydra.job.num", default=0)
        if run_dir is not None and self.records.is_dir():
            (self.records / f"{number}.txt").write_text(f"{run_dir}\n")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.records is None or not self.records.is_dir():
            return
        records = sorted(self.records.glob("*.txt"), key=lambda path: int(path.stem))
        report = sweep_report([Path(path.read_text().strip()) for path in records])
        shutil.rmtree(self.records, ignore_errors=True)
        if report:
            print(report, flush=True)

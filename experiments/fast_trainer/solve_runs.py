"""Training runs to a return threshold, as whole ``python -m rlmem.train`` processes, from this
checkout or from the code of another commit, and what each took: frames and wall seconds.

Used by the fast preset's tuning (:mod:`experiments.fast_trainer.tune`) and by
``benchmarks/time_to_solve.py``. A run's outcome is written beside it (``solve.json``), so a
sweep that is stopped resumes where it was: a finished run is read, not run again.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments.common.signal_relay import run_child

OUTCOME = "solve.json"
"""The file in a run's folder that records how it went (:class:`Solve`)."""

STOPPED = "Stopped at "
"""How ``python -m rlmem.train`` starts the line it prints when ``stop_return`` was reached."""


@dataclass(frozen=True)
class Solve:
    """One run to a threshold: the frames it trained, whether it reached ``stop_return``
    before its ``frames``, the wall seconds of the whole process (start-up included) and the
    load average (1 minute) before and after it."""

    frames: int
    reached: bool
    wall_s: float
    load_before: float
    load_after: float


def load_average() -> float:
    """The 1-minute load average (``/proc/loadavg``; ``os.getloadavg``)."""
    return os.getloadavg()[0]


def packaged_commit(repository: Path, commit: str, into: Path) -> Path:
    """The code of ``commit`` of ``repository`` as a folder that ``import rlmem`` loads with it
    on ``PYTHONPATH``: ``git archive`` of the commit, arranged as the package-dir mapping of
    ``pyproject.toml`` places it (``rlmem/agents`` is ``agents/``, ``rlmem/envs`` is
    ``envs/``). Made once: an existing folder is reused.

    Raises:
        RuntimeError: ``commit`` is no commit of ``repository``.
    """
    # Absolute: the symbolic links below would otherwise point relative to their own folder.
    repository, into = repository.resolve(), into.resolve()
    package = into / "package"
    if (package / "rlmem" / "agents").exists():
        return package
    source = into / "source"
    source.mkdir(parents=True, exist_ok=True)
    tarball = into / "source.tar"
    with tarball.open("wb") as out:
        if run_child(["git", "-C", str(repository), "archive", commit], stdout=out) != 0:
            raise RuntimeError(f"git archive of {commit} in {repository} failed: no such commit?")
    with tarfile.open(tarball) as archive:
        archive.extractall(source, filter="data")
    (package / "rlmem").mkdir(parents=True, exist_ok=True)
    for entry in (source / "rlmem").iterdir():
        (package / "rlmem" / entry.name).symlink_to(entry)
    for name in ("agents", "envs"):
        (package / "rlmem" / name).symlink_to(source / name)
    return package


def train_to_threshold(overrides: Sequence[str], run_dir: Path,
                       code: Path | None = None) -> Solve:
    """Run ``python -m rlmem.train`` with ``overrides`` (which name the env, memory, seed,
    frames and ``stop_return``) into ``run_dir``, on one thread, with ``code``'s rlmem on
    ``PYTHONPATH`` (None: the installed one); or read the outcome a finished run recorded.

    Raises:
        RuntimeError: the run failed (its output's tail in the message).
    """
    # Absolute: the run starts in another folder, where relative paths would name other
    # places (a relative PYTHONPATH would quietly import the installed rlmem instead of code's).
    run_dir = run_dir.resolve()
    outcome = run_dir / OUTCOME
    if outcome.exists():
        return Solve(**json.loads(outcome.read_text()))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if code is not None:
        env["PYTHONPATH"] = str(code.resolve())
    command = [sys.executable, "-m", "rlmem.train", *overrides, f"run_dir={run_dir}",
               "resume=false", "force=true", "progress_bar=false"]
    load_before, start = load_average(), time.perf_counter()
    # Beside the run, not in it: the run folder is rlmem.train's to create.
    log = run_dir.with_name(f"{run_dir.name}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        # Out of the checkout, so that ``import rlmem`` finds only the code asked for.
        status = run_child(command, env=env, cwd=tempfile.gettempdir(), stdout=out,
                           stderr=subprocess.STDOUT)
    wall_s = time.perf_counter() - start
    output = log.read_text()
    if status:
        raise RuntimeError(f"{' '.join(command)} failed:\n{output[-3000:]}")
    with (run_dir / "progress.csv").open(newline="") as rows:
        frames = int(float(list(csv.DictReader(rows))[-1]["frames"]))
    solve = Solve(frames, STOPPED in output, wall_s, load_before, load_average())
    outcome.write_text(json.dumps(asdict(solve)))
    return solve

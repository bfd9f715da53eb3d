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
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

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
        subprocess.CalledProcessError: ``commit`` is no commit of ``repository``.
    """
    package = into / "package"
    if (package / "rlmem" / "agents").exists():
        return package
    source = into / "source"
    source.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(repository), "archive", commit],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
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
    outcome = run_dir / OUTCOME
    if outcome.exists():
        return Solve(**json.loads(outcome.read_text()))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    command = [sys.executable, "-m", "rlmem.train", *overrides, f"run_dir={run_dir}",
               "resume=false", "force=true", "progress_bar=false"]
    load_before, start = load_average(), time.perf_counter()
    # Out of the checkout, so that ``import rlmem`` finds only the code asked for.
    done = subprocess.run(command, env=env, cwd=tempfile.gettempdir(), capture_output=True,
                          text=True)
    wall_s = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)} failed:\n{(done.stdout + done.stderr)[-3000:]}")
    with (run_dir / "progress.csv").open(newline="") as rows:
        frames = int(float(list(csv.DictReader(rows))[-1]["frames"]))
    solve = Solve(frames, STOPPED in done.stdout, wall_s, load_before, load_average())
    outcome.write_text(json.dumps(asdict(solve)))
    return solve

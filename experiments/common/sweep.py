"""Resumable reproduction sweeps: train a grid of runs, then evaluate what lacks a result.

The suites of ``experiments/`` are built from these steps. Every step skips finished work: a
trained run resumes from its checkpoint and returns at once when it has its frames (or has met
its ``stop_return``), and an evaluation whose JSON exists for the run's final frame count is
not repeated. So a suite can be stopped at any time and run again over several sittings.

Runs are laid out as ``<root>/<env>/<memory>/seed<k>/``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

from experiments.common.run_config import READ_ONLY, UnreadableRecordError, read_report, run_config
from experiments.common.signal_relay import run_child
from rlmem.cells import CELLS
from rlmem.envs import env_spec, episode_limit
from rlmem.evaluate import report_path
from rlmem.runs.progress import read_progress


def run_dirs(root: Path, env: str, memories: Sequence[str], seeds: Sequence[int]) -> list[Path]:
    """Where :func:`train_sweep` puts each run of ``env``."""
    return [root / env / memory / f"seed{seed}" for memory in memories for seed in seeds]


def runs_by_seed(root: Path, env: str, label: str, seeds: Sequence[int]) -> dict[int, Path]:
    """:func:`run_dirs` of one label (a memory's name, or the label its sweep gives), by seed."""
    return dict(zip(seeds, run_dirs(root, env, [label], seeds), strict=True))


def train_sweep(root: Path, env: str, memories: Sequence[str], seeds: Sequence[int],
                frames: int, jobs: int, overrides: Sequence[str] = (),
                label: str = "${memory.name}") -> None:
    """One Hydra multirun of ``python -m rlmem.train``: every memory × seed on ``env``.

    Locally through the joblib launcher with ``jobs`` processes; a ``hydra/launcher=...``
    override sends the same sweep to a cluster instead. Runs go to
    ``<root>/<env>/<label>/seed<k>``; the label is the memory's name unless another agent
    needs its own (e.g. ``sb3_lstm``).
    """
    command = [
        sys.executable, "-m", "rlmem.train", "-m", f"env={env}",
        f"memory={','.join(memories)}", f"seed={','.join(map(str, seeds))}",
        f"frames={frames}", "progress_bar=false",
        # hydra.sweep.dir: where Hydra's basic sweeper writes multirun.yaml (it cannot be off).
        f"hydra.sweep.dir={root}", f"run_dir={root}/${{env}}/{label}/seed${{seed}}",
        *overrides,
    ]
    if not any(override.startswith("hydra/launcher=") for override in overrides):
        command += ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}"]
    print("+", " ".join(command), flush=True)
    if (code := run_child(command)) != 0:
        raise subprocess.CalledProcessError(code, command)


def final_frames(run: Path) -> int | None:
    """The frame count of a run's last progress row (None before its first update).

    Raises:
        CorruptProgressError: the row is not rlmem's; the message names the file and the line.
    """
    progress = run / "progress.csv"
    rows = read_progress(progress) if progress.exists() else []
    return int(rows[-1].number("frames")) if rows else None


def full_attention(memory: str, envs: Sequence[str]) -> dict[str, int]:
    """The ``eval_memory`` that lets a cell with an episode bound (MemLSTM's ``capacity``)
    attend over every step of the longest episode of ``envs``, as the paper's full attention
    does, instead of a sliding window: one setting for all of a suite's envs, so a run's
    reports share it. Empty for other cells and for labels that are not cells.
    (``rlmem.evaluate`` alone raises the bound to each env's own limit,
    :func:`rlmem.cells.full_attention`.)"""
    cell = CELLS.get(memory)
    if cell is None or cell.episode_bound is None:
        return {}
    return {cell.episode_bound: max(_episode_limit(env) for env in envs)}


def _episode_limit(env: str) -> int:
    """The most steps an episode of ``env`` lasts (:func:`rlmem.envs.factory.episode_limit`)."""
    made = gym.make(env_spec(env).id)
    try:
        limit = episode_limit(made)
    finally:
        made.close()
    if limit is None:
        raise ValueError(f"{env} has no step limit: full attention over its episodes has no "
                         "size")
    return limit


def run_memory(run: Path) -> str:
    """The memory a run trained (its ``config.yaml``'s ``memory.name``), which an ablation's
    directory label (``memlstm_view3_direction``) does not name; the label itself for a run
    without a config yet."""
    if not (run / "config.yaml").exists():
        return run.parent.name
    memory = run_config(run).get("memory")
    if not isinstance(memory, dict) or "name" not in memory:
        raise UnreadableRecordError(f"{run / 'config.yaml'} records no memory.name, which every "
                                    f"run's config does. {READ_ONLY}")
    return str(memory["name"])


def evaluation_command(run: Path, env: str, episodes: int,
                       eval_memory: Mapping[str, Any] | None = None,
                       first_to_end: bool = False) -> list[str] | None:
    """The command evaluating ``run`` on ``env`` with the cell's weight-free hyperparameters
    of ``eval_memory`` changed (and the episodes counted ``first_to_end``); None when its JSON
    is there for the run's final frames, with as many episodes and the same ``eval_memory``."""
    eval_memory = dict(eval_memory or {})
    target = report_path(run, env, episodes=episodes, eval_memory=eval_memory,
                         first_to_end=first_to_end)
    if target.exists():
        try:
            report = read_report(target)
        except UnreadableRecordError as error:  # the evaluation replaces it, whole
            print(f"[suite] {str(error).split(' It was only read')[0]} It is evaluated again.",
                  flush=True)
        else:
            if (report["frames"] == final_frames(run) and report["episodes"] == episodes
                    and report.get("eval_memory", {}) == eval_memory):
                return None
    return [sys.executable, "-m", "rlmem.evaluate", f"run={run}", f"env={env}",
            f"episodes={episodes}", *(["first_to_end=true"] if first_to_end else []),
            *(f"+eval_memory.{key}={value}" for key, value in eval_memory.items())]

"""Every reader of ``progress.csv`` besides the logger names the file, the line and the column
of a row that is not rlmem's (issue 28, "Messages": "error: frames"): a garbled value, a row
cut short by a kill, a row with more fields than the header. Each reader gets a real file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from experiments.common.sweep import final_frames
from experiments.doorkey.summarize import summarize
from experiments.memory.aggregate import read_run
from experiments.supervised import aggregate, attention_onset, status
from experiments.transfer.aggregate import read_progress as transfer_progress
from rlmem.runs.logger import CorruptProgressError
from rlmem.tasks.base import Baseline
from rlmem.tasks.figures import learning_curve

RL_HEADER = "frames,updates,fps,return_mean,return_recent\n"
SUPERVISED_HEADER = "iteration,train/loss,eval/accuracy@T4,time/cpu_s\n"

GARBLED = "32,1,100,0.5,0.5\n64,2,100,0.5x,0.5\n"
"""Rows after an RL header whose second holds a value that is no number."""

BLANK_LAST_FRAMES = "32,1,100,0.5,0.5\n,2,100,0.5,0.5\n"
"""Rows after an RL header whose last has no frames."""

CUT = "32,1,100,0.5,0.5\n64,2,10"
"""Rows after an RL header whose last a kill cut short."""


@pytest.fixture(scope="module")
def supervised_scripts() -> dict[str, ModuleType]:
    """status, aggregate and attention_onset of experiments.supervised, by name."""
    return {"status": status, "aggregate": aggregate, "attention_onset": attention_onset}


def run_with(tmp_path: Path, text: str) -> Path:
    """A run directory whose ``progress.csv`` is ``text``."""
    run_dir = tmp_path / "seed0"
    run_dir.mkdir()
    (run_dir / "progress.csv").write_text(text)
    return run_dir


RL_READERS: dict[str, tuple[Callable[[Path], Any], str, str]] = {
    "experiments.common.sweep.final_frames": (
        final_frames, BLANK_LAST_FRAMES, "the row leaves blank the column 'frames'"),
    "experiments.transfer.aggregate": (
        lambda run: transfer_progress(run / "progress.csv"), GARBLED,
        "column 'return_mean' holds '0.5x', which is no number"),
    "experiments.memory.aggregate": (
        read_run, GARBLED.replace("0.5x,0.5", "0.5,0.5x"),
        "column 'return_recent' holds '0.5x', which is no number"),
    "experiments.doorkey.summarize": (
        summarize, GARBLED, "column 'return_mean' holds '0.5x', which is no number"),
}


@pytest.mark.parametrize("reader, rows, message", RL_READERS.values(), ids=RL_READERS.keys())
def test_rl_readers_name_the_file_line_and_column(reader: Callable[[Path], Any], rows: str,
                                                  message: str, tmp_path: Path) -> None:
    run_dir = run_with(tmp_path, RL_HEADER + rows)
    with pytest.raises(CorruptProgressError) as caught:
        reader(run_dir)
    assert str(caught.value).startswith(f"{run_dir / 'progress.csv'}, line 3: {message}. ")
    assert "nothing was changed" in str(caught.value)


def test_a_row_cut_short_or_too_long_is_named(tmp_path: Path) -> None:
    run_dir = run_with(tmp_path, RL_HEADER + CUT)
    with pytest.raises(CorruptProgressError, match=r"line 3: the row has 3 fields where the "
                                                   r"header has 5 \(a row cut short"):
        transfer_progress(run_dir / "progress.csv")
    (run_dir / "progress.csv").write_text(RL_HEADER + "32,1,100,0.5,0.5,7\n")
    with pytest.raises(CorruptProgressError, match=r"line 2: the row has 6 fields where the "
                                                   r"header has 5"):
        final_frames(run_dir)


def test_the_supervised_learning_curve_names_the_file(tmp_path: Path) -> None:
    run_dir = run_with(tmp_path, SUPERVISED_HEADER + "10,0.5,0.2,1.0\n20,0.4,oops,2.0\n")
    with pytest.raises(CorruptProgressError,
                       match=r"progress\.csv, line 3: column 'eval/accuracy@T4' holds 'oops'"):
        learning_curve(run_dir / "progress.csv", Baseline("accuracy", 0.1, "chance"), 4,
                       tmp_path / "curve.png")


def test_the_supervised_scripts_name_the_file(supervised_scripts: dict[str, ModuleType],
                                              tmp_path: Path) -> None:
    run_dir = run_with(tmp_path, SUPERVISED_HEADER + "10,0.5,0.2,1.0\n20,0.4,0.3,2.x\n")
    with pytest.raises(CorruptProgressError, match=r"line 3: column 'time/cpu_s' holds '2\.x'"):
        supervised_scripts["status"].run_status(run_dir, budget=100)
    (run_dir / "progress.csv").write_text(SUPERVISED_HEADER + "1x,0.5,0.2,1.0\n")
    status = supervised_scripts["status"].RunStatus(run_dir, None, 0, 0.0, None, None, False)
    with pytest.raises(CorruptProgressError, match=r"line 2: column 'iteration' holds '1x'"):
        supervised_scripts["aggregate"].progress_curve(status, "eval/accuracy@T4")
    with pytest.raises(CorruptProgressError, match=r"line 2: column 'iteration' holds '1x'"):
        supervised_scripts["attention_onset"].evaluations(run_dir)

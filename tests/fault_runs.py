"""What the fault tests of issue 53 share: a trained run to copy, a small file system to fill
or make read-only, and the check that a CLI ended in one paragraph."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli, run_module

TINY_SUPERVISED = ["seq_len=4", "batch_size=2", "iterations=2", "memory.hidden_size=8",
                   "eval_every=1", "eval_batch_size=2", "progress_bar=false", "figures=false"]
"""Overrides for a supervised run of two iterations."""


def train_tiny(root: Path) -> Path:
    """A real PPO run of two tiny updates in ``root/run``."""
    result = run_cli("rlmem.train", *TINY_PPO, "memory.hidden_size=8", f"run_dir={root / 'run'}",
                     cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    return root / "run"


def copy_run(trained: Path, into: Path) -> Path:
    """A copy of ``trained`` at ``into`` (its lock file too, as a copied run would have)."""
    shutil.copytree(trained, into)
    return into


def files(folder: Path) -> dict[str, bytes]:
    """Every regular file under ``folder`` but run locks (which hold their last holder's PID),
    by name: equal before and after, nothing was changed."""
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and not path.is_symlink() and not path.name.endswith(".lock")}


def one_paragraph(result: subprocess.CompletedProcess[str], program: str, *fragments: str
                  ) -> str:
    """The error of a CLI that stopped with status 1: one ``<program>: error:`` paragraph
    holding ``fragments``, no traceback. Returns it."""
    assert result.returncode == 1, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if line.startswith(f"{program}: error:")]
    assert len(errors) == 1, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def with_umask(mask: int, *command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m command...`` run under umask ``mask``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HYDRA_FULL_ERROR": "0"}
    return run_module(command[0], list(command[1:]), cwd, env, umask=mask)


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@contextmanager
def small_file_system(where: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` for the block (a disk to fill, or to make
    read-only); the test is skipped where this machine does not let it mount one (not root,
    or a container without the capability)."""
    where.mkdir(parents=True, exist_ok=True)
    if not shutil.which("mount") or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"this machine cannot mount a tmpfs ({made.stderr.strip()})")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True, capture_output=True)


def fill(folder: Path) -> None:
    """Fill the file system of ``folder`` to the last byte."""
    with (folder / "filler").open("wb", buffering=0) as file:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    file.write(b"\0" * size)
            except OSError:
                pass

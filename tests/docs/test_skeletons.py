"""The skeletons the site offers to copy work as printed: the cell of ``docs/cells.md`` registers
and passes the contract tests, the env of ``docs/rl.md`` passes gymnasium's env checker and
trains through ``python -m rlmem.train``.

A skeleton is a ``python`` block with a ``title="<file>"``: the file to save it as. Such a block
defines a cell or an env for good when run, so ``test_doc_examples.py`` (whose blocks have no
title) leaves it to this file, which runs each in a process or a module of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from cells import test_cells
from cli_runner import TINY_PPO, run_cli
from gymnasium.utils.env_checker import check_env
from locations import REPO, TESTS

SKELETON = re.compile(r'^```python title="([^"]+)"\n(.*?)^```', flags=re.MULTILINE | re.DOTALL)
"""A titled ``python`` block: the file name, and the code."""


def skeleton(page: str, title: str) -> str:
    """The code of the block titled ``title`` on ``docs/<page>``."""
    blocks = dict(SKELETON.findall((REPO / "docs" / page).read_text(encoding="utf-8")))
    assert title in blocks, f"docs/{page} has no block titled {title!r}: {sorted(blocks)}"
    return blocks[title]


def registered_name(code: str, call: str) -> str:
    """The name the skeleton passes to ``call`` (``register``, ``gym.register``)."""
    match = re.search(rf'^@?{re.escape(call)}\("([^"]+)"', code, flags=re.MULTILINE)
    assert match, f"the skeleton calls no {call}(...)"
    return match.group(1)


def test_the_cell_skeleton_registers_and_passes_the_contract(tmp_path: Path) -> None:
    """``tests/cells/test_cells.py`` as it stands, with the skeleton loaded first (``-p``), so
    that its cell is registered when the contract tests are collected."""
    code = skeleton("cells.md", "rlmem/cells/min_gru.py")
    name = registered_name(code, "register")
    (tmp_path / "doc_cell_skeleton.py").write_text(code, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-o", "addopts=", "-p", "doc_cell_skeleton", "-rA", "-k", name,
         str(TESTS / "cells" / "test_cells.py")], cwd=TESTS.parent, capture_output=True,
        text=True, timeout=600, check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1",
             "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])})
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for contract in (attribute for attribute in vars(test_cells)
                     if attribute.startswith("test_")):
        assert re.search(rf"PASSED \S+::{contract}\[[^\]]*\b{name}\b", result.stdout), contract


@pytest.fixture
def env_skeleton(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """The env skeleton saved as its title says, its folder on ``sys.path``: the folder and the
    ``module:EnvId`` that ``env=`` takes."""
    title = "my_memory_env.py"
    code = skeleton("rl.md", title)
    (tmp_path / title).write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path, f"{Path(title).stem}:{registered_name(code, 'gym.register')}"


def test_the_env_skeleton_passes_gymnasiums_checker(env_skeleton: tuple[Path, str]) -> None:
    _, env_id = env_skeleton
    env = gym.make(env_id)
    check_env(env.unwrapped, skip_render_check=True)
    env.reset(seed=0)
    returns = []
    for _ in range(20):  # a memoryless policy earns 1 or 0, as the bit was
        env.reset()
        done, total = False, 0.0
        while not done:
            _, reward, terminated, truncated, _ = env.step(0)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    assert set(returns) == {0.0, 1.0}


def test_the_env_skeleton_trains(env_skeleton: tuple[Path, str]) -> None:
    folder, env_id = env_skeleton
    result = run_cli("rlmem.train", f"env={env_id}", "memory=gru", *TINY_PPO, "run_dir=run",
                     cwd=folder)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert (folder / "run" / "checkpoint.pt").is_file()

"""The README's shell commands run as written, in order, in a fresh folder, with tiny budgets.

A newcomer runs the Quickstart top to bottom: each command must succeed after the ones before it
(copy, then transfer-copy, then a preset, each in a folder of its own; evaluate on the run that
train made). Only the budgets shrink: the keys of :data:`TINY` replace the README's values or
join them, so every other setting (env, cell, preset, run folder) is the README's.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from cli_runner import run_module
from locations import REPO

README = REPO / "README.md"

TINY: dict[str, dict[str, str]] = {
    "rlmem.train": {"frames": "2048", "progress_bar": "false"},
    "rlmem.evaluate": {"episodes": "2", "progress_bar": "false"},
    # eval_batch_size: transfer-copy's evaluations at T = 5000 are most of a tiny run's time.
    "rlmem.supervised": {"iterations": "2", "eval_batch_size": "2", "confirm_batches": "1",
                         "figures": "false", "progress_bar": "false"},
}
"""Per CLI, the budget keys a test run sets, replacing the README's value where it gives one."""


def readme_commands(text: str) -> list[list[str]]:
    """Every ``python -m rlmem.<cli> ...`` line of the README's ``bash`` blocks, in order, as
    argument lists (a trailing ``# comment`` dropped)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == ["python", "-m"] and words[2] in TINY:
                commands.append(words)
    return commands


def with_tiny_budget(words: list[str]) -> list[str]:
    """``words`` run by this interpreter, with :data:`TINY`'s keys for its CLI."""
    tiny = TINY[words[2]]
    kept = [word for word in words[3:] if word.split("=", 1)[0] not in tiny]
    return [sys.executable, "-m", words[2], *kept, *(f"{k}={v}" for k, v in tiny.items())]


def test_readme_is_a_front_door() -> None:
    """One screen before the first command: at most 150 lines, training within the first 40."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 150
    first_train = next(number for number, line in enumerate(lines, start=1)
                       if line.startswith("python -m rlmem.train"))
    assert first_train <= 40


def test_readme_names_the_quickstart_commands() -> None:
    modules = [words[2] for words in readme_commands(README.read_text())]
    assert {"rlmem.train", "rlmem.evaluate", "rlmem.supervised"} <= set(modules)


def test_readme_commands_run_in_order(tmp_path: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for words in readme_commands(README.read_text()):
        command = with_tiny_budget(words)
        done = run_module(command[2], command[3:], tmp_path, env)
        if done.returncode:
            pytest.fail(f"`{shlex.join(words)}` failed (run as {shlex.join(command[1:])}):\n"
                        f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}")

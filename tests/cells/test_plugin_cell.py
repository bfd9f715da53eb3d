"""A cell from someone else's package: one file, registered through the ``rlmem.cells`` entry
point, and nothing else touched. It builds with ``make_cell``, trains through
``python -m rlmem.train memory=<it>``, and passes the contract tests of
``tests/cells/test_cells.py``, which pick it up as they do every registered cell."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from cells import test_cells
from cli_runner import TINY_PPO, run_cli
from locations import TESTS
from omegaconf import OmegaConf

from rlmem.cells import CELLS, ENTRY_POINT_GROUP, CellPluginError, make_cell, registry
from rlmem.cells.registry import CellPluginWarning, load_plugins

PACKAGE = "rlmem_toy_plugin"
"""The throwaway package: a namespace package holding one file, the cell."""

NAME = "toy_rnn"

TOY_CELL = '''"""A leaky Elman RNN: h_t = λ h_{t-1} + (1 - λ) tanh(W x_t + U h_{t-1} + b)."""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells import Cell, Dims, register


class ToyState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]
    steps: Annotated[Tensor, Dims(dtype=torch.long)]


@register("toy_rnn")
class ToyRNN(Cell):
    """Shapes: x ``(T, B, input_size)``; output ``(T, B, hidden_size)``."""

    state_type = ToyState

    def __init__(self, input_size: int, hidden_size: int, *, leak: float = 0.5) -> None:
        super().__init__(input_size, hidden_size)
        self.leak = leak
        self.input_map = nn.Linear(input_size, hidden_size)
        self.recurrent_map = nn.Linear(hidden_size, hidden_size, bias=False)

    def step(self, x_t: Tensor, state: ToyState) -> tuple[Tensor, ToyState, dict[str, Tensor]]:
        candidate = torch.tanh(self.input_map(x_t) + self.recurrent_map(state.h))
        h = torch.lerp(candidate, state.h, self.leak)
        return h, ToyState(h, state.steps + 1), {}
'''


def _distribution(site: Path, distribution: str, entry_points: str) -> None:
    """Install ``distribution`` into ``site`` as pip would leave it: a ``.dist-info`` folder
    with its metadata and its entry points."""
    info = site / f"{distribution}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder to put on the path: the cell's single file, and its distribution's metadata."""
    site = tmp_path_factory.mktemp("site")
    (site / PACKAGE).mkdir()
    (site / PACKAGE / f"{NAME}.py").write_text(TOY_CELL)
    _distribution(site, PACKAGE, f"{NAME} = {PACKAGE}.{NAME}")
    return site


@pytest.fixture
def with_plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Undo what loading plugins into this process registers and imports."""
    cells = dict(CELLS)
    yield
    CELLS.clear()
    CELLS.update(cells)
    for module in [module for module in sys.modules if module.startswith(PACKAGE)]:
        monkeypatch.delitem(sys.modules, module)


def _with_site_on_path(monkeypatch: pytest.MonkeyPatch, site: Path) -> None:
    """What a subprocess sees once the plugin is installed: ``site`` on its path."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))


def test_the_plugin_cell_builds_through_make_cell(plugin_site: Path, with_plugins: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    assert NAME not in CELLS
    monkeypatch.syspath_prepend(str(plugin_site))
    load_plugins()
    load_plugins()  # idempotent: a second load registers nothing twice
    cell = make_cell(NAME, input_size=3, hidden_size=5, leak=0.25)
    assert type(cell).__module__ == f"{PACKAGE}.{NAME}" and cell.leak == 0.25
    y, state = cell(torch.randn(4, 2, 3))
    assert y.shape == (4, 2, 5) and state.steps.tolist() == [4, 4]
    assert dict(cell.state_shapes()) == {"h": ((5,), None), "steps": ((), torch.long)}


def test_a_broken_plugin_is_warned_about_and_fails_only_when_asked_for(
        tmp_path: Path, with_plugins: None, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rlmem_broken_plugin.py").write_text("raise RuntimeError('no cell here')\n")
    _distribution(tmp_path, "rlmem-broken-plugin", "broken = rlmem_broken_plugin")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "BROKEN_PLUGINS", {})  # get_cell_class reads it from there
    named = (r"cell plugin 'broken' \(rlmem_broken_plugin, from rlmem-broken-plugin.*"
             r"RuntimeError: no cell")
    with pytest.warns(CellPluginWarning, match=named):
        load_plugins()
    load_plugins()  # warned once: a second load adds nothing
    assert make_cell("lstm", input_size=3, hidden_size=5).output_size == 5
    with pytest.raises(CellPluginError, match=rf"memory=broken is the cell of a {named}"):
        make_cell("broken", input_size=3, hidden_size=5)


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_the_plugin_cell_trains_through_the_cli(plugin_site: Path, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _with_site_on_path(monkeypatch, plugin_site)
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.train", f"memory={NAME}", "memory.leak=0.75", *TINY_PPO,
                     "frames=32", f"run_dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    config = OmegaConf.load(run_dir / "config.yaml")
    assert config.memory.name == NAME and config.memory.leak == 0.75
    assert (run_dir / "checkpoint.pt").exists()


def test_the_plugin_cell_passes_the_contract_tests(plugin_site: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``tests/cells/test_cells.py`` as it stands, run where the plugin is installed."""
    _with_site_on_path(monkeypatch, plugin_site)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", "-k", NAME,
         str(TESTS / "cells" / "test_cells.py")], cwd=TESTS.parent, capture_output=True, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    contracts = [name for name in vars(test_cells) if name.startswith("test_")]
    for contract in contracts:
        assert re.search(rf"PASSED \S+::{contract}\[[^\]]*\b{NAME}\b", result.stdout), contract

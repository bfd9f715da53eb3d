"""A cell plug-in that is broken is named in one message, and breaks nothing else (issue 28,
"Messages"): a cell whose outputs are not ``output_size`` wide is named at its first forward, not
in torch's shape error; a plug-in that fails to import is warned about once, every other cell
and CLI works (evaluate of an lstm run), and asking for its cell names the plug-in and its
error. Each plug-in is a real throwaway package with an entry point, put on the CLI's path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli
from hydra import compose, initialize_config_dir

from rlmem.cells import ENTRY_POINT_GROUP
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.train import train as train_run

WIDE_CELL = '''"""A cell that returns twice the width it declares."""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells import Cell, Dims, register


class WideState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]


@register("wide_rnn")
class WideRNN(Cell):
    state_type = WideState

    def __init__(self, input_size: int, hidden_size: int, *, gain: float = 1.0) -> None:
        super().__init__(input_size, hidden_size)
        self.gain = gain
        self.input_map = nn.Linear(input_size, hidden_size)

    def step(self, x_t: Tensor, state: WideState) -> tuple[Tensor, WideState, dict[str, Tensor]]:
        h = torch.tanh(self.gain * self.input_map(x_t) + state.h)
        return torch.cat([h, h], dim=-1), WideState(h), {}
'''

BROKEN_MODULE = "raise RuntimeError('no cell here')\n"


def install(site: Path, distribution: str, module: str, source: str, entry_point: str) -> Path:
    """``module.py`` in ``site`` and a ``.dist-info`` whose entry point names it, as pip would
    leave a package: what the CLIs see with ``site`` on ``PYTHONPATH``."""
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source)
    info = site / f"{distribution}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_point} = {module}\n")
    return site


def on_path(monkeypatch: pytest.MonkeyPatch, site: Path) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))


def test_a_cell_of_the_wrong_width_is_named_at_its_first_forward(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    on_path(monkeypatch, install(tmp_path / "site", "rlmem-wide-plugin", "rlmem_wide_plugin",
                                 WIDE_CELL, "wide_rnn"))
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.train", "memory=wide_rnn", "memory.hidden_size=8", *TINY_PPO,
                     f"run_dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert ("rlmem.train: error: cell 'wide_rnn' (rlmem_wide_plugin.WideRNN) returned outputs "
            "of shape (1, 2, 16) for inputs of shape (1, 2, ") in result.stderr
    assert "its output_size is 8" in result.stderr
    assert "mat1 and mat2" not in result.stderr and not (run_dir / "checkpoint.pt").exists()


@pytest.fixture
def broken_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A plug-in whose module fails to import, on the CLIs' path."""
    site = install(tmp_path / "site", "rlmem-broken-plugin", "rlmem_broken_plugin",
                   BROKEN_MODULE, "broken")
    on_path(monkeypatch, site)
    return site


PLUGIN = ("cell plugin 'broken' (rlmem_broken_plugin, from rlmem-broken-plugin, entry-point "
          "group 'rlmem.cells') failed to load: RuntimeError: no cell here")


@pytest.mark.slow  # a long CLI check: run with -m slow
def test_a_broken_plugin_leaves_evaluating_an_lstm_run_working(
        broken_site: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "lstm"
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[*TINY_PPO, "memory=lstm", "memory.hidden_size=8",
                                          "frames=32", f"run_dir={run_dir}"])
    train_run(cfg, run_dir)  # in this process, where the plug-in is not installed
    result = run_cli("rlmem.evaluate", f"run={run_dir}", "episodes=1", "num_envs=1",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    assert result.stderr.count(PLUGIN) == 1 and "CellPluginWarning" in result.stderr
    assert "memory=broken is unavailable until the plug-in is fixed" in result.stderr


@pytest.mark.parametrize("module, args", [
    ("rlmem.train", TINY_PPO),
    ("rlmem.supervised", ["seq_len=4", "batch_size=2", "iterations=2", "progress_bar=false",
                          "figures=false"]),
], ids=["train", "supervised"])
def test_asking_for_the_broken_plugins_cell_names_the_plugin_and_its_error(
        broken_site: Path, tmp_path: Path, module: str, args: list[str]) -> None:
    run_dir = tmp_path / "run"
    result = run_cli(module, "memory=broken", *args, f"run_dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"{module}: error: memory=broken is the cell of a {PLUGIN}" in result.stderr
    assert "fix the plug-in or reinstall it" in result.stderr
    assert not run_dir.exists()

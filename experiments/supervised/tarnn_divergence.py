"""Why TARNN diverges on adding at T = 750 with the TARNN paper's lr of 1e-2.

    OMP_NUM_THREADS=1 python experiments/supervised/tarnn_divergence.py

Trains ``kag2021_table4_adding_tarnn_T750`` for the two iterations it survives (into a
temporary directory), then runs its state over one T = 750 batch and prints the state's mean
norm at steps 0, 100, 300 and 749: after the two updates, with the same weights but η put back
at its initial value, and at initialisation with and without the updated η. Nothing is written
into the repository.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from rlmem.cells import Cell, make_cell_from_config
from rlmem.tasks.base import TaskBatch
from rlmem.tasks.saved import load_saved_model

PRESET = "kag2021_table4_adding_tarnn_T750"
STEPS = (0, 100, 300, 749)


@torch.no_grad()
def state_norms(cell: Cell, batch: TaskBatch) -> str:
    output = cell(batch.inputs)[0]
    return ", ".join(f"{output[t].norm(dim=-1).mean().item():.3g}" for t in STEPS)


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as run_dir:
        subprocess.run([sys.executable, "-m", "rlmem.supervised", f"+preset={PRESET}",
                        "iterations=2", "checkpoint_every=1", "eval_every=1", "figures=false",
                        "progress_bar=false", f"run_dir={run_dir}"], check=True)
        saved = load_saved_model(Path(run_dir))
    cell = saved.model.cell
    eta = cell.get_parameter("eta").detach().clone()
    initial_eta = float(saved.config["memory"]["eta"])
    batch = saved.task.sample(4, saved.config["seq_len"], torch.Generator().manual_seed(0))
    torch.manual_seed(saved.seed)
    initial = make_cell_from_config(dict(saved.config["memory"]), input_size=saved.task.input_size)
    print(f"state norm at steps {STEPS}; η after two updates: {eta.tolist()}")
    print(f"  after two updates:                       {state_norms(cell, batch)}")
    cell.get_parameter("eta").data.fill_(initial_eta)
    print(f"  the same weights, η back at {initial_eta:g}:       {state_norms(cell, batch)}")
    print(f"  at initialisation:                       {state_norms(initial, batch)}")
    initial.get_parameter("eta").data.copy_(eta)
    print(f"  at initialisation, with the updated η:   {state_norms(initial, batch)}")


if __name__ == "__main__":
    main()

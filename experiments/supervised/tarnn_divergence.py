"""Why TARNN diverges at the TARNN paper's lr of 1e-2: on adding at T = 750, and on copy.

    OMP_NUM_THREADS=1 python -m experiments.supervised.tarnn_divergence
    OMP_NUM_THREADS=1 python -m experiments.supervised.tarnn_divergence kag2021_table4_copy_tarnn

Trains the preset (``kag2021_table4_adding_tarnn_T750`` by default) into a temporary directory,
with a checkpoint at every iteration, until the trainer stops it on a non-finite loss or
gradient. The last checkpoint is then the model one update before the divergence. The script
runs its state over one batch at the preset's length and prints the state's mean norm at four
steps: with those weights, with the same weights but η put back at its initial value, and at
initialisation with and without the updated η. Nothing is written into the repository.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import torch

from experiments.common.signal_relay import exit_passing_signals_on, run_child
from experiments.supervised.rows import searchpath
from rlmem.cells import Cell, make_cell_from_config
from rlmem.runs.errors import INTERRUPTED
from rlmem.tasks.base import TaskBatch
from rlmem.tasks.saved import load_saved_model

DEFAULT_PRESET = "kag2021_table4_adding_tarnn_T750"
MAX_ITERATIONS = 100
"""Both paper presets diverge well within this (adding at T = 750 after 2 updates, copy
after 8); a preset that survives it is reported as such."""


def sampled_steps(length: int) -> tuple[int, ...]:
    """The first step, a quarter and half of the way, and the last."""
    return (0, length // 4, length // 2, length - 1)


@torch.no_grad()
def state_norms(cell: Cell, inputs: torch.Tensor, steps: tuple[int, ...]) -> str:
    output = cell(inputs)[0]
    return ", ".join(f"{output[t].norm(dim=-1).mean().item():.3g}" for t in steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preset", nargs="?", default=DEFAULT_PRESET)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as run_dir:
        # A diverging run exits with an error (copy) or records the divergence as its result
        # (adding): either way its last checkpoint is the one to read.
        code = run_child([sys.executable, "-m", "rlmem.supervised", searchpath(),
                          f"+preset={args.preset}", f"iterations={MAX_ITERATIONS}",
                          "checkpoint_every=1", "eval_every=1000", "target=null",
                          "figures=false", "progress_bar=false", f"run_dir={run_dir}"])
        if code == INTERRUPTED:  # its last checkpoint is not the one before a divergence
            return code
        saved = load_saved_model(Path(run_dir))
    cell = saved.model.cell
    updates = saved.iteration
    eta = cell.get_parameter("eta").detach().clone()
    initial_eta = float(saved.config["memory"]["eta"])
    batch: TaskBatch = saved.task.sample(4, saved.config["seq_len"],
                                         torch.Generator().manual_seed(0))
    inputs = saved.model.encode(batch.inputs)
    steps = sampled_steps(inputs.shape[0])
    torch.manual_seed(saved.seed)
    initial = make_cell_from_config(dict(saved.config["memory"]), input_size=saved.task.input_size)
    survived = "survived" if updates >= MAX_ITERATIONS else "diverged after"
    print(f"{args.preset}: {survived} {updates} updates; η after them: {eta.tolist()}")
    print(f"state norm at steps {steps}:")
    print(f"  after {updates} updates:                  {state_norms(cell, inputs, steps)}")
    cell.get_parameter("eta").data.fill_(initial_eta)
    print(f"  the same weights, η back at {initial_eta:g}:  {state_norms(cell, inputs, steps)}")
    print(f"  at initialisation:                  {state_norms(initial, inputs, steps)}")
    initial.get_parameter("eta").data.copy_(eta)
    print(f"  at initialisation, with the updated η: {state_norms(initial, inputs, steps)}")
    return 0


if __name__ == "__main__":
    exit_passing_signals_on(main)

"""iRNN on a short adding task: the paper's SiRNN default (K=1, η=1e-2) against K=5.

    python benchmarks/irnn_steps.py

Same budget as the slow learning check (tests/cells/test_cells_learn.py): adding at T=30, hidden 32,
batch 64, 400 Adam updates at lr 1e-2, test MSE on 1024 fresh sequences (naive baseline 0.167).
"""

from __future__ import annotations

import torch

from rlmem.cells import make_cell_from_config
from rlmem.tasks import SequenceModel, make_task

SEQ_LEN, BATCH, ITERATIONS, LR = 30, 64, 400, 1e-2


def test_mse(**hparams: float) -> float:
    """Train iRNN with ``hparams`` and return its test MSE."""
    torch.manual_seed(0)
    task = make_task("adding")
    memory = {"name": "irnn", "hidden_size": 32, **hparams}
    model = SequenceModel(make_cell_from_config(memory, input_size=task.input_size),
                          task.output_size, task.categorical)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    generator = torch.Generator().manual_seed(0)
    for _ in range(ITERATIONS):
        batch = task.sample(BATCH, SEQ_LEN, generator)
        loss = task.loss(model(batch.inputs)[0], batch)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    with torch.no_grad():
        batch = task.sample(1024, SEQ_LEN, torch.Generator().manual_seed(1))
        return float(task.loss(model(batch.inputs)[0], batch))


if __name__ == "__main__":
    for hparams in ({}, {"K": 5}, {"eta": 0.5}):
        print(f"irnn {hparams or 'defaults (K=1, eta=0.01)'}: test MSE {test_mse(**hparams):.4f}"
              f" (baseline {make_task('adding').baseline(SEQ_LEN).value:.3f})", flush=True)

"""Slow: every registered cell learns a short adding task, beating its naive baseline."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rlmem.cells import CELLS, make_cell
from rlmem.tasks import SequenceModel, make_task

SEQ_LEN, BATCH, ITERATIONS, LR = 30, 64, 400, 1e-2  # lr of the TARNN and iRNN papers

OVERRIDES: dict[str, dict[str, Any]] = {
    # iRNN's default, Eq. 8 with a full U, stays at 0.16 MSE in this budget (also with K=5);
    # SiRNN in the paper's low-rank form (P = U = I + VH) with η starting at 1 reaches 0.007
    # (the IncrementalRNN docstring lists the variants measured).
    "irnn": {"K": 1, "rank": 8, "eta": 1.0},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_beats_the_adding_baseline(name: str) -> None:
    torch.manual_seed(0)
    task = make_task("adding")
    model = SequenceModel(make_cell(name, input_size=task.input_size, hidden_size=32,
                                    **OVERRIDES.get(name, {})),
                          task.output_size, task.categorical)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    generator = torch.Generator().manual_seed(0)
    for iteration in range(ITERATIONS):
        model.cell.anneal(iteration / ITERATIONS)
        batch = task.sample(BATCH, SEQ_LEN, generator)
        outputs, result = model(batch.inputs)
        loss = task.loss(outputs, batch) + result.aux.total_loss()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    with torch.no_grad():
        batch = task.sample(1024, SEQ_LEN, torch.Generator().manual_seed(1))
        mse = float(task.loss(model(batch.inputs)[0], batch))
    baseline = task.baseline(SEQ_LEN).value
    assert mse < 0.5 * baseline, f"{name}: test MSE {mse:.4f}, naive baseline {baseline:.3f}"

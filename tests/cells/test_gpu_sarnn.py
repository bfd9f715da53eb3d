"""SA-RNN's Triton kernels (:mod:`rlmem.cells._engines.gpu.sarnn`) at a realistic size.

``tests/cells/test_engines.py`` proves the kernels equal to the cell's ``scan(step)`` at a tiny
size (hidden 6, batch 5); here the same in float64 (outputs, states, traces, gradients, with
resets) at hidden 32 and batch 20: a step's 640 neurons span two of the kernels' blocks of
:data:`~rlmem.cells._engines.gpu.sarnn.BLOCK`, the second partly masked.
"""

from __future__ import annotations

import pytest
import torch
from reference.equivalence import assert_matches_reference, use_loops

from rlmem.cells import make_cell
from rlmem.cells._engines import gpu


@pytest.mark.slow
def test_sarnn_kernels_equal_the_step_at_a_realistic_size(
        monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("triton", monkeypatch)
    cells = []
    for _ in range(2):
        torch.manual_seed(0)
        cell = make_cell("sarnn", input_size=8, hidden_size=32, lam=1e-2)
        cell.anneal(0.5)
        cells.append(cell)
    engine, step = cells
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)  # scan(step)
    runs, taken = gpu.runs, []

    def recorded(like: torch.Tensor, name: str) -> bool:
        taken.append(runs(like, name))
        return taken[-1]

    monkeypatch.setattr(gpu, "runs", recorded)
    assert_matches_reference(engine, step, steps=20, batch=20, chunks=(1, 9), traces=True)
    assert taken and all(taken), "the kernels did not compute every chunk"

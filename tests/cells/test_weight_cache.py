"""The weights a cell derives for acting (``rlmem.cells._engines.weight_cache``) follow every
optimizer step, whoever takes it: after a step of torch's fused Adam, which does not count its
writes on the weights' version counters, a cell acting without autograd computes what a fresh
copy of it computes. Without the step hook relstm, relrnn, memlstm and irnn acted with their
first weights in our PPO with the fused kernel (``experiments/fast_trainer/FUSED_ADAM.md``),
and would have in any trainer stepping with it."""

from __future__ import annotations

import copy

import pytest
import torch

from rlmem.cells import CELLS, make_cell
from rlmem.cells.base import Cell

T, B, IN, H = 6, 3, 4, 8


def _acting(cell: Cell, x: torch.Tensor) -> torch.Tensor:
    """The cell's outputs for ``x`` without autograd, as a rollout computes them."""
    with torch.no_grad():
        y, _ = cell(x)
    return y


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("kernel", ["fused", "foreach"])
def test_acting_after_an_optimizer_step_reads_the_stepped_weights(name: str,
                                                                  kernel: str) -> None:
    torch.manual_seed(0)
    cell = make_cell(name, input_size=IN, hidden_size=H)
    x = torch.randn(T, B, IN)
    before = _acting(cell, x)                         # derives and keeps its weights
    optimizer = torch.optim.Adam(cell.parameters(), lr=1e-2, fused=kernel == "fused",
                                 foreach=kernel == "foreach")
    y, _ = cell(x)
    y.square().mean().backward()
    optimizer.step()
    after = _acting(cell, x)
    torch.testing.assert_close(after, _acting(copy.deepcopy(cell), x), rtol=0, atol=0)
    assert not torch.equal(before, after), f"{name}: one Adam step left its outputs as they were"

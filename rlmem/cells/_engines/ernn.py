r"""ERNN's engine: its iterations over a chunk, rearranged so that the products with M are
shared between steps, under autograd.

The residual of step t, a trace, needs :math:`M h_t`, which is also the first product of step
t + 1: it is computed once, and the residuals of all steps in one batched pass at the end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from rlmem.cells.resets import reset_masks, reset_where
from rlmem.cells.time_loop import ScanResult

if TYPE_CHECKING:  # the cell module imports this one
    from rlmem.cells.ernn import ERNN, ERNNState


def fast_scan(cell: ERNN, x: Tensor, state: ERNNState, resets: Tensor) -> ScanResult:
    """:class:`~rlmem.cells.ernn.ERNN` over a chunk.

    Shapes: as :meth:`rlmem.cells.base.Cell.fast_scan`.
    """
    drives = cell.project_input(x)
    weight_t = cell.fixed_point_weight().T
    etas = cell.eta.unbind()
    masks = reset_masks(resets)
    h = state.h
    outputs, products = [], []  # products[t] = M h_{t-1}, before a reset
    for t, drive in enumerate(drives.unbind(0)):
        product = h @ weight_t
        products.append(product)
        mask = masks[t]
        if mask is not None:
            h = reset_where(h, mask)
            product = reset_where(product, mask)  # M·0, exactly
        for k, eta in enumerate(etas):
            if k:
                product = h @ weight_t
            h = torch.lerp(h, cell.phi(product + drive), eta)  # (1-η) h + η σ(M h + d)
        outputs.append(h)
    y = torch.stack(outputs)
    with torch.no_grad():  # a trace: σ(M h_t + d_t) - h_t, with M h_t from step t + 1
        products.append(h @ weight_t)
        residual = (cell.phi(torch.stack(products[1:]) + drives) - y).norm(dim=-1)
    return ScanResult(y, type(state)(h), {"residual": residual})

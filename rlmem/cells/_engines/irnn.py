r"""iRNN's engine: its rounds over a chunk, rearranged so that the products with the transition
A are shared between rounds, under autograd.

Round k's first Euler step starts from :math:`g_0 = 0`, so it reads :math:`A h_{k-1}`. Its
residual, a trace, needs :math:`A(g_K + h_{k-1}) = A h_k + A h_{k-1}`: both products are
computed anyway (the first by round k + 1), so the residuals of all rounds cost one batched
pass at the end, instead of one product per round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from rlmem.cells.resets import reset_masks, reset_where
from rlmem.cells.time_loop import ScanResult

if TYPE_CHECKING:  # the cell module imports this one
    from rlmem.cells.irnn import IncrementalRNN, IRNNState


def fast_scan(cell: IncrementalRNN, x: Tensor, state: IRNNState, resets: Tensor) -> ScanResult:
    """:class:`~rlmem.cells.irnn.IncrementalRNN` over a chunk.

    Shapes: as :meth:`rlmem.cells.base.Cell.fast_scan`.
    """
    drives = cell.project_input(x)
    transition = cell.transition()
    etas = cell.eta.unbind()
    masks = reset_masks(resets)
    h = state.h
    outputs, states, products, firsts = [], [], [], []
    for t, drive in enumerate(drives.unbind(0)):
        product = transition(h)  # A h_{t-1}, before a reset
        products.append(product)
        mask = masks[t]
        if mask is not None:
            h = reset_where(h, mask)
            product = reset_where(product, mask)  # A·0, exactly
        first = product + drive  # g_0 = 0: the first step reads A h
        g = etas[0] * torch.addcmul(cell.phi(first), cell.alpha, h, value=-1.0)
        for eta in etas[1:]:
            g = g + eta * cell.residual(g, h, drive, transition)
        outputs.append(g)
        states.append(h)
        firsts.append(first)
        h = g
    y = torch.stack(outputs)
    with torch.no_grad():  # a trace: φ(A g + A h + d) - α (g + h), A g from round t + 1
        products.append(transition(h))
        total = y + torch.stack(states)
        residual = (cell.phi(torch.stack(products[1:]) + torch.stack(firsts))
                    - cell.alpha * total).norm(dim=-1)
    return ScanResult(y, type(state)(h), {"residual": residual})

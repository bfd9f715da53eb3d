r"""ERNN's engine: its iterations over a chunk, rearranged so that the products with M are
shared between steps, under autograd.

The residual of step t, a trace, needs :math:`M h_t`, which is also the first product of step
t + 1: it is computed once, and the residuals of all steps in one batched pass at the end.
Where :func:`.gpu.runs`, a chunk is one Triton kernel forward and one backward
(:mod:`.gpu.ernn`) instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from rlmem.cells._engines import gpu
from rlmem.cells.resets import reset_masks, reset_where
from rlmem.cells.time_loop import S, ScanResult


class ERNNWeights(NamedTuple):
    """What ERNN's iterations read besides the state: the cell's weights, rearranged."""

    fixed_point_t: Tensor
    r""":math:`M^\top = ((I + U) V)^\top`, ``(H, H)``."""
    eta: Tensor
    r"""The step sizes :math:`\eta_k`, ``(K,)``."""


def fast_scan(drives: Tensor, weights: ERNNWeights, state: S, resets: Tensor,
              phi: Callable[[Tensor], Tensor]) -> ScanResult:
    r"""ERNN (:class:`~rlmem.cells.ernn.ERNN`) over a chunk: K iterations of
    :math:`h \leftarrow (1 - \eta_k) h + \eta_k \phi(M h + d_t)` per step.

    Shapes:
        - drives: ``(T, B, H)``, :math:`d_t` (the cell's ``project_input``); resets ``(T, B)``
        - state: a one-field NamedTuple, :math:`h` ``(B, H)``; returned of the same type
    """
    kernels = gpu.kernels(drives, "ernn",
                          lambda kernels: kernels.uncovered(drives.shape[-1], phi))
    if kernels is not None:
        y, residual = kernels.scan(drives, state[0], weights.fixed_point_t, weights.eta, resets,
                                   phi)
        return ScanResult(y, state._make([y[-1]]), {"residual": residual})
    weight_t = weights.fixed_point_t
    etas = weights.eta.unbind()
    masks = reset_masks(resets)
    h = state[0]
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
            h = torch.lerp(h, phi(product + drive), eta)  # (1-η) h + η σ(M h + d)
        outputs.append(h)
    y = torch.stack(outputs)
    with torch.no_grad():  # a trace: σ(M h_t + d_t) - h_t, with M h_t from step t + 1
        products.append(h @ weight_t)
        residual = (phi(torch.stack(products[1:]) + drives) - y).norm(dim=-1)
    return ScanResult(y, state._make([h]), {"residual": residual})


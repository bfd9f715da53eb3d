r"""iRNN's engine: its rounds over a chunk, rearranged so that the products with the transition
A are shared between rounds, under autograd.

Round k's first Euler step starts from :math:`g_0 = 0`, so it reads :math:`A h_{k-1}`. Its
residual, a trace, needs :math:`A(g_K + h_{k-1}) = A h_k + A h_{k-1}`: both products are
computed anyway (the first by round k + 1), so the residuals of all rounds cost one batched
pass at the end, instead of one product per round. Where :func:`.gpu.runs`, a chunk is one
Triton kernel forward and one backward (:mod:`.gpu.irnn`) instead, on the matrix of
:math:`A^\top`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor

from rlmem.cells._engines import gpu
from rlmem.cells.resets import reset_masks, reset_where
from rlmem.cells.time_loop import S, ScanResult


class IRNNWeights(NamedTuple):
    """What iRNN's rounds read besides the state and the drives."""

    transition: Callable[[Tensor], Tensor]
    """``z ↦ A z``, its matrix formed once for the call (full, or low-rank: the cell's)."""
    eta: Tensor
    r"""The Euler step sizes :math:`\eta_i`, ``(K,)``."""
    alpha: Tensor
    r""":math:`\alpha`, a scalar."""


def fast_scan(drives: Tensor, weights: IRNNWeights, state: S, resets: Tensor,
              phi: Callable[[Tensor], Tensor]) -> ScanResult:
    r"""iRNN (:class:`~rlmem.cells.irnn.IncrementalRNN`) over a chunk: per round, from
    :math:`g_0 = 0`, K Euler steps
    :math:`g_i = g_{i-1} + \eta_i (\phi(A(g_{i-1} + h) + d) - \alpha (g_{i-1} + h))`.

    Shapes:
        - drives: ``(T, B, D)``, :math:`d_k` (the cell's ``project_input``); resets ``(T, B)``
        - state: a one-field NamedTuple, :math:`h` ``(B, D)``; returned of the same type
    """
    transition, alpha = weights.transition, weights.alpha
    kernels = gpu.kernels(drives, "irnn",
                          lambda kernels: kernels.uncovered(drives.shape[-1], phi))
    if kernels is not None:
        # A's matrix, transposed, from the map itself: z ↦ A z on the rows of I is Aᵀ (one
        # product per call, under autograd; full or low-rank alike)
        size = drives.shape[-1]
        transition_t = transition(torch.eye(size, dtype=drives.dtype, device=drives.device))
        y, residual = kernels.scan(drives, state[0], transition_t, weights.eta, alpha, resets,
                                   phi, incremental=True)
        return ScanResult(y, state._make([y[-1]]), {"residual": residual})
    etas = weights.eta.unbind()
    masks = reset_masks(resets)
    h = state[0]
    outputs, states, products, firsts = [], [], [], []
    for t, drive in enumerate(drives.unbind(0)):
        product = transition(h)  # A h_{t-1}, before a reset
        products.append(product)
        mask = masks[t]
        if mask is not None:
            h = reset_where(h, mask)
            product = reset_where(product, mask)  # A·0, exactly
        first = product + drive  # g_0 = 0: the first step reads A h
        g = etas[0] * torch.addcmul(phi(first), alpha, h, value=-1.0)
        for eta in etas[1:]:
            total = g + h
            g = g + eta * (phi(transition(total) + drive) - alpha * total)
        outputs.append(g)
        states.append(h)
        firsts.append(first)
        h = g
    y = torch.stack(outputs)
    with torch.no_grad():  # a trace: φ(A g + A h + d) - α (g + h), A g from round t + 1
        products.append(transition(h))
        total = y + torch.stack(states)
        residual = (phi(torch.stack(products[1:]) + torch.stack(firsts))
                    - alpha * total).norm(dim=-1)
    return ScanResult(y, state._make([h]), {"residual": residual})


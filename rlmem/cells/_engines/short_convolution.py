r"""A causal depthwise convolution over the last K steps of the episode, for a whole chunk at once.

DeltaNet's short convolution (Yang et al., 2024: ``ShortConvolution``, kernel 4, before its
queries, keys and values): each channel ``c`` of step ``t`` becomes

.. math::
    y_{t,c} = \sum_{j=0}^{K-1} w_{c, K-1-j} \, x_{t-j,c}

(``w`` in :class:`torch.nn.Conv1d`'s order, the oldest tap first), where a step before the
episode's start counts as zero, as the zero padding of a sequence that starts there. A cell
holds the inputs of its last K steps in its state (the *window*, oldest first, zeros before the
episode), so that a one-step rollout convolves exactly as the chunk does; a reset empties it.
Over a chunk the window and the chunk are one padded sequence, and each tap is masked where it
reaches back across a reset (:func:`~rlmem.cells._engines.windowed_attention.last_reset`).

Tensor functions on any device; autograd gives the gradients. The cell's ``step`` (one step
from the window) is the specification (``tests/cells/test_modern_cells.py``).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlmem.cells._engines.windowed_attention import last_reset


def convolve_step(x: Tensor, window: Tensor, weight: Tensor) -> tuple[Tensor, Tensor]:
    """One step: ``x`` enters the window, and the window is convolved.

    Shapes:
        - x: ``(B, C)``; window: ``(B, K, C)``, the last K inputs, oldest first; weight: ``(C, K)``
        - returns y ``(B, C)`` and the window after the step ``(B, K, C)``
    """
    window = torch.cat([window[:, 1:], x.unsqueeze(1)], 1)
    return torch.einsum("bkc,ck->bc", window, weight), window


def convolve_chunk(x: Tensor, window: Tensor, weight: Tensor,
                   resets: Tensor) -> tuple[Tensor, Tensor]:
    """Every step of a chunk, each tap zeroed where it reaches before its episode's start, and
    the window after the chunk (its steps before the chunk's last reset emptied), as the steps
    of :func:`convolve_step` with their resets would leave it.

    Shapes:
        - x: ``(T, B, C)``; window: ``(B, K, C)``, the last K inputs before the chunk, oldest
          first; weight: ``(C, K)``; resets: ``(T, B)`` bool
        - returns y ``(T, B, C)`` and the window ``(B, K, C)``
    """
    steps, size = x.shape[0], weight.shape[1]
    padded = torch.cat([window.transpose(0, 1), x])  # step s at row size + s
    start = last_reset(resets)  # (T, B): the episode's first step in the chunk, -1: before it
    t = torch.arange(steps, device=x.device).unsqueeze(1)
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    y = torch.zeros_like(x)
    for back in range(size):  # the tap that reaches ``back`` steps before t
        reaches = (start < 0) | (t - back >= start)
        source = padded[size - back:size - back + steps]
        y = torch.addcmul(y, torch.where(reaches.unsqueeze(-1), source, zero),
                          weight[:, size - 1 - back])
    # the window's slot i holds step steps - K + i, emptied if before the chunk's last reset
    first = start[-1]  # (B,)
    slot_step = torch.arange(steps - size, steps, device=x.device).unsqueeze(1)  # (K, 1)
    held = (first < 0) | (slot_step >= first)
    return y, torch.where(held.unsqueeze(-1), padded[steps:], zero).transpose(0, 1)

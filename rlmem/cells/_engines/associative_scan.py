r"""An elementwise linear recurrence with resets, over a whole chunk at once: an associative scan.

The cells whose state follows :math:`s_t = a_t \odot s_{t-1} + b_t`, with :math:`a_t, b_t`
computed from the input alone (FFM, LRU), need no time loop: the maps compose associatively,
:math:`(a_1, b_1) \circ (a_2, b_2) = (a_1 a_2, a_2 b_1 + b_2)`, so every prefix is computed in
:math:`\lceil \log_2 C \rceil` rounds of whole-tensor operations (Hillis & Steele, 1986;
Blelloch, 1990; as S5, Smith et al., 2023, and FFM run).

A reset before step ``t`` sets the state to zero before :math:`(a_t, b_t)` applies, which is the
map with :math:`a_t = 0` (:func:`reset_decay`): the scan needs no other change. The chunk is cut
into blocks of ``block`` steps: the rounds run within every block at once, then one
multiply-add per block carries the state from block to block. On the CPU short blocks keep the
work near :math:`T` (a scan over T steps costs :math:`T \log_2 T`); on an accelerator one
block keeps the rounds few.

Everything here is out-of-place tensor algebra, so autograd gives the gradients, and it runs on
any device and dtype torch's ``mul`` takes (complex included). The cells' own ``step`` is the
specification; ``tests/cells/test_modern_cells.py`` proves these equal to it.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from rlmem.cells.resets import reset_where

CPU_BLOCK = 16
"""Steps per block on the CPU (work about :math:`T (1 + \\log_2 16)` multiply-adds)."""


class Affine(NamedTuple):
    """The map :math:`s \\mapsto a \\odot s + b` of each step, stacked on a leading time
    dimension."""

    a: Tensor
    b: Tensor




def reset_decay(a: Tensor, resets: Tensor) -> Tensor:
    """``a`` with the steps that reset set to the zero map, so that the state before them is
    dropped: the one place the engines of this module apply a reset.

    :func:`~rlmem.cells.resets.reset_where` passes no gradient to the filled entries, so none
    crosses a reset.

    Shapes:
        - a: ``(T, B, *)``; resets: ``(T, B)`` bool; returns ``a``'s shape
    """
    return reset_where(a, resets.view(*resets.shape, *(1,) * (a.dim() - 2)))


def compose_diagonal(first: Affine, then: Affine) -> Affine:
    """``first`` then ``then``, elementwise maps: :math:`(a_1 a_2, a_2 b_1 + b_2)`."""
    return Affine(first.a * then.a, torch.addcmul(then.b, then.a, first.b))


def apply_diagonal(step: Affine, state: Tensor) -> Tensor:
    """:math:`a \\odot s + b`."""
    return torch.addcmul(step.b, step.a, state)


def diagonal_scan(a: Tensor, b: Tensor, state: Tensor, resets: Tensor) -> Tensor:
    r"""Every :math:`s_t = a_t \odot s_{t-1} + b_t`, from :math:`s_{-1}` = ``state``, with
    ``resets[t]`` zeroing :math:`s_{t-1}` first.

    Shapes:
        - a: ``(T, B, *)`` or broadcastable to b; b: ``(T, B, *)``; state: ``(B, *)``;
          resets: ``(T, B)``; returns ``(T, B, *)``, the states after each step
    """
    a = reset_decay(a.expand_as(b), resets)
    return _scan(Affine(a, b), state)


def _scan(steps: Affine, state: Tensor) -> Tensor:
    """Prefixes within blocks (:func:`_block_prefixes`), then the state carried across them."""
    length = steps.b.shape[0]
    block = length if steps.b.device.type != "cpu" else min(CPU_BLOCK, length)
    blocks = -(-length // block)
    pad = blocks * block - length
    if pad:  # zero maps after the last step: they change nothing before it
        steps = Affine(*(torch.cat([value, value.new_zeros(pad, *value.shape[1:])])
                         for value in steps))
    prefixes = _block_prefixes(Affine(*(value.view(blocks, block, *value.shape[1:])
                                        for value in steps)))
    outputs = []
    for index in range(blocks):
        states = apply_diagonal(Affine(prefixes.a[index], prefixes.b[index]),
                                state.unsqueeze(0))
        outputs.append(states)
        state = states[-1]
    return torch.cat(outputs)[:length]


def _block_prefixes(steps: Affine) -> Affine:
    """Within every block at once, each step's map composed with all before it in its block
    (Hillis–Steele: round ``d`` composes each map with the one ``d`` steps earlier).

    Shapes:
        - steps' fields: ``(blocks, block, B, *)``; returns the same shapes
    """
    shift = 1
    while shift < steps.b.shape[1]:
        earlier = Affine(steps.a[:, :-shift], steps.b[:, :-shift])
        later = Affine(steps.a[:, shift:], steps.b[:, shift:])
        composed = compose_diagonal(earlier, later)
        steps = Affine(*(torch.cat([value[:, :shift], new], dim=1)
                         for value, new in zip(steps, composed, strict=True)))
        shift *= 2
    return steps

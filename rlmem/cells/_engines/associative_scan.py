r"""An elementwise linear recurrence with resets, over a whole chunk at once: an associative scan.

The cells whose state follows :math:`s_t = a_t \odot s_{t-1} + b_t`, with :math:`a_t, b_t`
computed from the input alone (FFM, LRU), need no time loop: the maps compose associatively,
:math:`(a_1, b_1) \circ (a_2, b_2) = (a_1 a_2, a_2 b_1 + b_2)`, so every prefix is computed in
:math:`\lceil \log_2 C \rceil` rounds of whole-tensor operations (Hillis & Steele, 1986;
Blelloch, 1990; as S5, Smith et al., 2023, and FFM run).

A reset before step ``t`` sets the state to zero before :math:`(a_t, b_t)` applies, which is the
map with :math:`a_t = 0` (:func:`reset_decay`): the scan needs no other change. On the CPU
the chunk is cut into blocks of ``block`` steps: the prefixes run step by step within every
block at once, then one multiply-add per block carries the state from block to block, so the
work stays near :math:`3T` in about :math:`2\,\text{block} + T / \text{block}` operations
(a Python-level round costs more here than its arithmetic). On an accelerator the chunk is one
block, composed in :math:`\lceil \log_2 T \rceil` rounds (more work, fewer launches).

The forward is out-of-place tensor algebra on any device and dtype torch's ``mul`` takes
(complex included); the backward is the same scan run backwards in time
(:class:`_LinearRecurrence`), not autograd's trace of every composition, which on the CPU cost
more than the forward's arithmetic several times over. The cells' own ``step`` is the
specification; ``tests/cells/test_modern_cells.py`` proves the scan and its gradients equal to
it in float64, both ways of composing a block.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor

from rlmem.cells.resets import reset_where

CPU_BLOCK = 16
"""Steps per block where the prefixes run step by step (:data:`STEP_BY_STEP_ON`)."""

STEP_BY_STEP_ON = ("cpu",)
"""The device types whose chunks are cut into blocks of :data:`CPU_BLOCK` steps, composed step
by step (:func:`_sequential_prefixes`); elsewhere a chunk is one block composed in
logarithmic rounds (:func:`_block_prefixes`)."""


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
    return _LinearRecurrence.apply(a, b, state)


class _LinearRecurrence(torch.autograd.Function):
    r"""The scan with its backward written as a scan too, in place of autograd's trace of every
    composition (a chunk's backward then costs about what its forward costs).

    With :math:`g_t` the gradient of the loss at the output :math:`s_t`, the part that reaches
    :math:`s_{t-1}` through step ``t``, :math:`u_t = \overline{a_t} (g_t + u_{t+1})`
    (:math:`u_T = 0`), is the same recurrence run backwards in time, with the maps
    :math:`(\overline{a_t}, \overline{a_t} g_t)`. Then :math:`G_t = g_t + u_{t+1}` is the
    total gradient of :math:`s_t`, and :math:`\partial L / \partial b_t = G_t`,
    :math:`\partial L / \partial a_t = G_t \overline{s_{t-1}}`,
    :math:`\partial L / \partial s_{-1} = u_0` (conjugates as torch's complex autograd takes
    them; for real tensors they change nothing).
    """

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor, state: Tensor) -> Tensor:
        states = _scan(Affine(a, b), state)
        ctx.save_for_backward(a, state, states)
        return states

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        a, state, states = ctx.saved_tensors
        a_bar = a.conj()
        into_earlier = _scan(Affine(a_bar, a_bar * grad), torch.zeros_like(state), reverse=True)
        total = grad.clone()
        total[:-1] += into_earlier[1:]
        grad_a = torch.empty_like(a)
        torch.mul(total[0], state.conj(), out=grad_a[0])
        torch.mul(total[1:], states[:-1].conj(), out=grad_a[1:])
        return grad_a, total, into_earlier[0]


def _scan(steps: Affine, state: Tensor, reverse: bool = False) -> Tensor:
    r"""Prefixes within blocks, then the state carried across them; ``reverse``: the maps
    taken from the last step to the first (:math:`s_t = a_t \odot s_{t+1} + b_t`, ``state``
    :math:`s_T`).

    On the CPU the prefixes run step by step within every block at once
    (:func:`_sequential_prefixes`: about :math:`3T` multiply-adds in :math:`2 \cdot` ``block``
    operations); on an accelerator the chunk is one block and the prefixes take
    :math:`\lceil \log_2 T \rceil` rounds (:func:`_block_prefixes`), fewer launches for more
    work.
    """
    length = steps.b.shape[0]
    on_cpu = steps.b.device.type in STEP_BY_STEP_ON
    block = min(CPU_BLOCK, length) if on_cpu else length
    blocks = -(-length // block)
    pad = blocks * block - length
    if pad:  # zero maps after the last step taken: they change nothing before them
        steps = Affine(*(_padded(value, pad, at_start=reverse) for value in steps))
    in_blocks = Affine(*(value.view(blocks, block, *value.shape[1:]) for value in steps))
    prefixes = (_sequential_prefixes if on_cpu else _block_prefixes)(in_blocks, reverse)
    # The state entering each block, in the order taken: one multiply-add per block, from the
    # composition of all the block's maps (its last prefix).
    whole_a, whole_b = (value.unbind(1)[0 if reverse else -1].unbind(0) for value in prefixes)
    entering = [state]
    for index in range(blocks - 1, 0, -1) if reverse else range(blocks - 1):
        entering.append(apply_diagonal(Affine(whole_a[index], whole_b[index]), entering[-1]))
    entering = entering[::-1] if reverse else entering
    states = apply_diagonal(prefixes, torch.stack(entering).unsqueeze(1)).flatten(0, 1)
    if not pad:
        return states
    return states[pad:] if reverse else states[:length]


def _padded(value: Tensor, pad: int, at_start: bool) -> Tensor:
    """``value`` with ``pad`` zero steps before its first step or after its last."""
    zeros = value.new_zeros(pad, *value.shape[1:])
    return torch.cat([zeros, value] if at_start else [value, zeros])


def _sequential_prefixes(steps: Affine, reverse: bool) -> Affine:
    r"""Within every block at once, each step's map composed with all taken before it in its
    block, one step after the other (:math:`O(\text{block})` operations, :math:`O(T)` work).

    Shapes:
        - steps' fields: ``(blocks, block, B, *)``; returns the same shapes
    """
    taken = list(zip(steps.a.unbind(1), steps.b.unbind(1), strict=True))
    taken = taken[::-1] if reverse else taken
    prefixes = [Affine(*taken[0])]
    for a, b in taken[1:]:
        prefixes.append(compose_diagonal(prefixes[-1], Affine(a, b)))
    prefixes = prefixes[::-1] if reverse else prefixes
    return Affine(torch.stack([prefix.a for prefix in prefixes], 1),
                  torch.stack([prefix.b for prefix in prefixes], 1))


def _block_prefixes(steps: Affine, reverse: bool) -> Affine:
    """Within every block at once, each step's map composed with all taken before it in its
    block (Hillis–Steele: round ``d`` composes each map with the one ``d`` steps earlier).

    Shapes:
        - steps' fields: ``(blocks, block, B, *)``; returns the same shapes
    """
    if reverse:
        flipped = _block_prefixes(Affine(*(value.flip(1) for value in steps)), reverse=False)
        return Affine(*(value.flip(1) for value in flipped))
    shift = 1
    while shift < steps.b.shape[1]:
        earlier = Affine(steps.a[:, :-shift], steps.b[:, :-shift])
        later = Affine(steps.a[:, shift:], steps.b[:, shift:])
        composed = compose_diagonal(earlier, later)
        steps = Affine(*(torch.cat([value[:, :shift], new], dim=1)
                         for value, new in zip(steps, composed, strict=True)))
        shift *= 2
    return steps

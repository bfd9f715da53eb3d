r"""An elementwise linear recurrence with resets, over a whole chunk at once: an associative scan.

The cells whose state follows :math:`s_t = a_t \odot s_{t-1} + b_t`, with :math:`a_t, b_t`
computed from the input alone (FFM, LRU), need no time loop: the maps compose associatively,
:math:`(a_1, b_1) \circ (a_2, b_2) = (a_1 a_2, a_2 b_1 + b_2)`, so every prefix is computed in
:math:`\lceil \log_2 C \rceil` rounds of whole-tensor operations (Hillis & Steele, 1986;
Blelloch, 1990; as S5, Smith et al., 2023, and FFM run).

A reset before step ``t`` sets the state to zero before :math:`(a_t, b_t)` applies, which is the
map with :math:`a_t = 0` (:func:`reset_decay`): the scan needs no other change. On the CPU
the recurrence runs as written, one multiply-add a step (a step's arithmetic over the batch
costs little more than the call, and every way of composing maps tried so far, blocks of
step-by-step prefixes included, moves several times the data): compiled
(``csrc/diagonal.h``) where one map holds for every step and batch item, as FFM's and LRU's
does, so that it is never written out over the chunk (LRU's training step went from 1.17x to
0.78x our lstm's), else one ``addcmul`` a step into the output. On an accelerator the chunk's
prefixes are composed in :math:`\lceil \log_2 T \rceil` rounds (more work, fewer launches).

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

from rlmem.cells._engines import compiled
from rlmem.cells.resets import reset_where

STEP_BY_STEP_ON = ("cpu",)
"""The device types whose chunks run one multiply-add a step (:func:`_step_by_step`);
elsewhere a chunk's prefixes are composed in logarithmic rounds (:func:`_logarithmic_prefixes`)."""


class Affine(NamedTuple):
    """The map :math:`s \\mapsto a \\odot s + b` of each step, stacked on a leading time
    dimension."""

    a: Tensor
    b: Tensor




def reset_decay(a: Tensor, resets: Tensor) -> Tensor:
    """``a`` with the steps that reset set to the zero map, so that the state before them is
    dropped: the one place this module's Python engines apply a reset (the compiled loop,
    ``csrc/diagonal.h``, applies the same rule to its state and its gradient).

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
    native = compiled.ops(b)
    # one map for every step and batch item, all in one dtype (the compiled loop promotes none)
    if native is not None and a.dim() <= b.dim() - 2 and a.dtype == b.dtype == state.dtype:
        states: Tensor = _CompiledRecurrence.apply(a, b, state, resets, native)
        return states
    a = reset_decay(a.expand_as(b), resets)
    return _LinearRecurrence.apply(a, b, state)


class _CompiledRecurrence(torch.autograd.Function):
    """The scan with one map ``a`` for every step, compiled (``csrc/diagonal.h``): forward
    and backward each one pass over the chunk, the map never written out over it, its
    gradient summed over the steps and batch items in the same pass. The equations are
    :class:`_LinearRecurrence`'s."""

    @staticmethod
    def forward(ctx: Any, a: Tensor, b: Tensor, state: Tensor, resets: Tensor,
                native: Any) -> Tensor:
        steps, batch = b.shape[:2]
        a_full = a.expand(b.shape[2:]).reshape(-1)
        flat_b, flat_state = b.reshape(steps, batch, -1), state.reshape(batch, -1)
        states = native.diagonal_forward(a_full, flat_b, flat_state, resets)
        ctx.native, ctx.a_shape = native, a.shape
        ctx.save_for_backward(a_full, flat_state, states, resets)
        return states.view(b.shape)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        a_full, state, states, resets = ctx.saved_tensors
        grad_a, grad_b, grad_state = ctx.native.diagonal_backward(
            grad.reshape(states.shape), a_full, state, states, resets)
        shape = grad.shape
        return (grad_a.view(shape[2:]).sum_to_size(ctx.a_shape), grad_b.view(shape),
                grad_state.view(shape[1:]), None, None)


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
        a_bar = a.conj().resolve_conj()  # once, not at each step of the scan
        into_earlier = _scan(Affine(a_bar, a_bar * grad), torch.zeros_like(state), reverse=True)
        total = grad.clone()
        total[:-1] += into_earlier[1:]
        grad_a = torch.empty_like(a)
        torch.mul(total[0], state.conj(), out=grad_a[0])
        torch.mul(total[1:], states[:-1].conj(), out=grad_a[1:])
        return grad_a, total, into_earlier[0]


def _scan(steps: Affine, state: Tensor, reverse: bool = False) -> Tensor:
    r"""Every state of the recurrence from ``state``; ``reverse``: the maps taken from the last
    step to the first (:math:`s_t = a_t \odot s_{t+1} + b_t`, ``state`` :math:`s_T`).

    On the CPU one multiply-add a step, written into the output (:func:`_step_by_step`); on an
    accelerator the prefixes of the whole chunk in :math:`\lceil \log_2 T \rceil` rounds
    (:func:`_logarithmic_prefixes`), fewer launches for more work.
    """
    if steps.b.device.type in STEP_BY_STEP_ON:
        return _step_by_step(steps, state, reverse)
    return apply_diagonal(_logarithmic_prefixes(steps, reverse), state)


def _step_by_step(steps: Affine, state: Tensor, reverse: bool) -> Tensor:
    """The recurrence itself: each state from the one before, by one ``addcmul`` into the
    output. On the CPU a step's multiply-add over ``(B, *)`` costs little more than the call,
    and composing maps (prefix products, stacked prefixes) moves several times the data.

    Shapes:
        - steps' fields: ``(T, B, *)``; state: ``(B, *)``; returns ``(T, B, *)``
    """
    states = torch.empty_like(steps.b)
    length = steps.b.shape[0]
    for t in range(length - 1, -1, -1) if reverse else range(length):
        state = torch.addcmul(steps.b[t], steps.a[t], state, out=states[t])
    return states


def _logarithmic_prefixes(steps: Affine, reverse: bool) -> Affine:
    """Each step's map composed with all taken before it (Hillis–Steele: round ``d`` composes
    each map with the one ``d`` steps earlier); ``reverse``: taken from the last step.

    Shapes:
        - steps' fields: ``(T, B, *)``; returns the same shapes
    """
    if reverse:
        flipped = _logarithmic_prefixes(Affine(*(value.flip(0) for value in steps)), False)
        return Affine(*(value.flip(0) for value in flipped))
    shift = 1
    while shift < steps.b.shape[0]:
        earlier = Affine(steps.a[:-shift], steps.b[:-shift])
        later = Affine(steps.a[shift:], steps.b[shift:])
        composed = compose_diagonal(earlier, later)
        steps = Affine(*(torch.cat([value[:shift], new])
                         for value, new in zip(steps, composed, strict=True)))
        shift *= 2
    return steps

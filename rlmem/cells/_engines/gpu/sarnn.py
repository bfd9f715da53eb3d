r"""SA-RNN's Triton kernels: the elementwise work of a step, forward and backward, each one
launch beside cuBLAS's recurrent matmul.

The math is :class:`~rlmem.cells._engines.sarnn.SARNNScan`'s (its docstring derives it from
:meth:`~rlmem.cells.sarnn.SARNN.step`), on the cell's own input terms: blocks ``[n, u, r, z]``
of :meth:`~rlmem.cells.sarnn.SARNN.project_input`, the kernels computing
:math:`\tanh(a) = 2\sigma(2a) - 1` and the hard sigmoid
:math:`\mathrm{clamp}(\tfrac{\alpha}{2}(w_u \odot h + W_i x + b_u) + \tfrac12, 0, 1)`
themselves (a rollout's step then costs no ops besides the loop's). A step forward is two
launches: :math:`W_{hh} h` (``mm``) and :func:`_forward_step`; a step backward two:
:func:`_backward_step` and the ``addmm_`` of the gate gradients with :math:`W_{hh}`. Both
kernels are elementwise over the ``B · H`` neurons of a step (no ``tl.dot``, so no shape is too
small or too large for them).

Resets, by :mod:`rlmem.cells.resets`' rule: the forward kernel of step t also writes the
incoming state of step t + 1, zero where the env resets there; the backward kernel of step t
drops the gradient that arrives from step t + 1 where the env resets there (no gradient crosses
a reset). The loops read nothing back from the device, so a CUDA graph can capture them.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from torch import Tensor

BLOCK = 512
"""Neurons (of the ``B · H`` of a step) per program."""


class SARNNSaved(NamedTuple):
    """What the forward loop keeps for the backward loop."""

    inputs: Tensor
    """The input terms ``[n, u, r, z]``, contiguous ``(T, B, 4H)``."""
    hidden: Tensor
    r""":math:`W_{hh} h_{t-1}`, ``(T, B, 3H)`` (the kernels add :math:`b_{hh}`)."""
    states: Tensor
    """The incoming states, after resets, ``(T + 1, B, H)`` (the last one is not read)."""
    probability: Tensor
    r""":math:`\tilde u_t`, ``(T, B, H)``."""
    update: Tensor
    r""":math:`u_t`, ``(T, B, H)``."""
    resets: Tensor
    """``(T, B)`` as bytes, 1 where the env resets at step t."""
    weights: tuple[Tensor, Tensor, Tensor]
    r""":math:`b_{hh}`, :math:`w_u` and :math:`\alpha/2`, contiguous."""


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _gates(inputs_ptr, hidden_ptr, bias_ptr, row, col, size, mask):
    """The GRU's gates r, z, its candidate n and the recurrent n term, of one step, from the
    input terms and :math:`W_{hh} h` (the bias :math:`b_{hh}` added here)."""
    in_n = tl.load(inputs_ptr + row * 4 * size + col, mask=mask, other=0.0)
    in_r = tl.load(inputs_ptr + row * 4 * size + 2 * size + col, mask=mask, other=0.0)
    in_z = tl.load(inputs_ptr + row * 4 * size + 3 * size + col, mask=mask, other=0.0)
    hid_r = (tl.load(hidden_ptr + row * 3 * size + col, mask=mask, other=0.0)
             + tl.load(bias_ptr + col, mask=mask, other=0.0))
    hid_z = (tl.load(hidden_ptr + row * 3 * size + size + col, mask=mask, other=0.0)
             + tl.load(bias_ptr + size + col, mask=mask, other=0.0))
    hid_n = (tl.load(hidden_ptr + row * 3 * size + 2 * size + col, mask=mask, other=0.0)
             + tl.load(bias_ptr + 2 * size + col, mask=mask, other=0.0))
    r = _sigmoid(in_r + hid_r)
    z = _sigmoid(in_z + hid_z)
    n = 2.0 * _sigmoid(2.0 * (in_n + r * hid_n)) - 1.0
    return r, z, n, hid_n


@triton.jit
def _probability(inputs_ptr, w_u_ptr, half_slope_ptr, h, row, col, size,
                 mask):
    """ũ, the coordinator's hard sigmoid of slope α."""
    in_u = tl.load(inputs_ptr + row * 4 * size + size + col, mask=mask, other=0.0)
    w_u = tl.load(w_u_ptr + col, mask=mask, other=0.0)
    half_slope = tl.load(half_slope_ptr)
    return tl.minimum(tl.maximum(half_slope * (in_u + w_u * h) + 0.5, 0.0), 1.0), w_u * half_slope


@triton.jit
def _kept(reset_next_ptr, row, mask, value, HAS_NEXT: tl.constexpr):
    """``value`` where the env does not reset at the next step (if any), else 0."""
    if HAS_NEXT:
        reset = tl.load(reset_next_ptr + row, mask=mask, other=0)
        return tl.where(reset != 0, 0.0, value)
    return value * 0.0


@triton.jit
def _forward_step(inputs_ptr, hidden_ptr, bias_ptr, h_ptr, reset_next_ptr,
                  w_u_ptr, half_slope_ptr, y_ptr, probability_ptr, update_ptr, h_next_ptr,
                  numel, size, HAS_NEXT: tl.constexpr, BLOCK: tl.constexpr):
    """One step: ``y``, ũ, u, and the next step's incoming state (zero where it resets)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    row = offsets // size
    col = offsets % size
    _r, z, n, _hid_n = _gates(inputs_ptr, hidden_ptr, bias_ptr, row, col, size, mask)
    h = tl.load(h_ptr + offsets, mask=mask, other=0.0)
    gap = h - n
    kept = gap - z * gap
    probability, _ = _probability(inputs_ptr, w_u_ptr, half_slope_ptr, h, row, col, size, mask)
    update = tl.where(probability > 0.5, 1.0, 0.0).to(h.dtype)
    h_new = h - update * kept
    tl.store(y_ptr + offsets, h_new, mask=mask)
    tl.store(probability_ptr + offsets, probability, mask=mask)
    tl.store(update_ptr + offsets, update, mask=mask)
    if HAS_NEXT:
        tl.store(h_next_ptr + offsets, _kept(reset_next_ptr, row, mask, h_new, HAS_NEXT),
                 mask=mask)


@triton.jit
def _backward_step(inputs_ptr, hidden_ptr, bias_ptr, h_ptr, probability_ptr,
                   update_ptr, reset_next_ptr, w_u_ptr, half_slope_ptr, grad_y_ptr,
                   grad_probability_ptr, carry_ptr, grad_all_ptr, numel, size,
                   HAS_NEXT: tl.constexpr, BLOCK: tl.constexpr):
    """One step back: the gradients of the step's pre-activations into ``grad_all``'s blocks
    ``[n, u, r, z | hidden n]`` (u's before its factor α/2), and the direct part of the
    incoming state's into ``carry`` (in place: ``carry`` held the gradient arriving from step
    t + 1's incoming state)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    row = offsets // size
    col = offsets % size
    r, z, n, hid_n = _gates(inputs_ptr, hidden_ptr, bias_ptr, row, col, size, mask)
    h = tl.load(h_ptr + offsets, mask=mask, other=0.0)
    gap = h - n
    kept = gap - z * gap
    probability = tl.load(probability_ptr + offsets, mask=mask, other=0.0)
    update = tl.load(update_ptr + offsets, mask=mask, other=0.0)
    carry = tl.load(carry_ptr + offsets, mask=mask, other=0.0)
    grad = (tl.load(grad_y_ptr + offsets, mask=mask, other=0.0)
            + _kept(reset_next_ptr, row, mask, carry, HAS_NEXT))
    # u = ũ + const: ū = -h̄ ⊙ d goes straight to ũ, then through the clamp (open interval).
    grad_u = tl.load(grad_probability_ptr + offsets, mask=mask, other=0.0) - grad * kept
    grad_pre_u = tl.where((probability > 0.0) & (probability < 1.0), grad_u, 0.0)
    _, w_u_scaled = _probability(inputs_ptr, w_u_ptr, half_slope_ptr, h, row, col, size, mask)
    grad_gru = update * grad
    grad_h = grad - grad_gru + grad_gru * z + grad_pre_u * w_u_scaled
    grad_pre_n = (grad_gru - grad_gru * z) * (1.0 - n * n)
    base = grad_all_ptr + row * 5 * size + col
    tl.store(base, grad_pre_n, mask=mask)
    tl.store(base + size, grad_pre_u, mask=mask)
    tl.store(base + 2 * size, grad_pre_n * hid_n * r * (1.0 - r), mask=mask)
    tl.store(base + 3 * size, grad_gru * gap * z * (1.0 - z), mask=mask)
    tl.store(base + 4 * size, grad_pre_n * r, mask=mask)
    tl.store(carry_ptr + offsets, grad_h, mask=mask)


def _grid(batch: int, size: int) -> tuple[int]:
    return (triton.cdiv(batch * size, BLOCK),)


def forward(inputs: Tensor, h0: Tensor, resets: Tensor, weight_hh: Tensor, bias_hh: Tensor,
            w_u: Tensor, half_slope: Tensor) -> tuple[Tensor, SARNNSaved]:
    """The forward loop over a chunk: the outputs and what the backward loop reads.

    Shapes:
        - inputs: ``(T, B, 4H)`` (``project_input``); h0: ``(B, H)``; resets: ``(T, B)`` bool
        - weight_hh: ``(3H, H)``; bias_hh: ``(3H,)``; w_u: ``(H,)``; half_slope: α/2, scalar
        - returns y ``(T, B, H)`` and :class:`SARNNSaved`
    """
    time_steps, batch, size = inputs.shape[0], h0.shape[0], h0.shape[1]
    inputs = inputs.contiguous()
    flags = resets.contiguous().view(torch.uint8)
    weights = (bias_hh.contiguous(), w_u.contiguous(), half_slope.contiguous())
    hidden = inputs.new_empty(time_steps, batch, 3 * size)
    states = inputs.new_empty(time_steps + 1, batch, size)
    states[0].copy_(h0).masked_fill_(resets[0, :, None], 0.0)
    y, probability, update = (inputs.new_empty(time_steps, batch, size) for _ in range(3))
    weight_hh_t = weight_hh.t()
    grid = _grid(batch, size)
    for t in range(time_steps):
        torch.mm(states[t], weight_hh_t, out=hidden[t])
        _forward_step[grid](inputs[t], hidden[t], weights[0], states[t],
                            flags[min(t + 1, time_steps - 1)], *weights[1:], y[t],
                            probability[t], update[t], states[t + 1], batch * size, size,
                            HAS_NEXT=t + 1 < time_steps, BLOCK=BLOCK)
    return y, SARNNSaved(inputs, hidden, states, probability, update, flags, weights)


def backward(saved: SARNNSaved, grad_y: Tensor, grad_probability: Tensor,
             weight_hh: Tensor) -> tuple[Tensor, Tensor]:
    """The backward loop over a chunk: the gradients of the pre-activations, in blocks
    ``[n, u, r, z | hidden n]`` (the u block before its factor α/2), and of ``h0``.

    Shapes:
        - grad_y, grad_probability: ``(T, B, H)``
        - returns ``(T, B, 5H)`` and ``(B, H)``
    """
    time_steps, batch, size = grad_y.shape
    grad_y, grad_probability = grad_y.contiguous(), grad_probability.contiguous()
    grad_all = grad_y.new_empty(time_steps, batch, 5 * size)
    carry = grad_y.new_zeros(batch, size)
    bias_hh, w_u, half_slope = saved.weights
    grid = _grid(batch, size)
    for t in range(time_steps - 1, -1, -1):
        _backward_step[grid](saved.inputs[t], saved.hidden[t], bias_hh, saved.states[t],
                             saved.probability[t], saved.update[t],
                             saved.resets[min(t + 1, time_steps - 1)], w_u, half_slope,
                             grad_y[t], grad_probability[t], carry, grad_all[t], batch * size,
                             size, HAS_NEXT=t + 1 < time_steps, BLOCK=BLOCK)
        carry.addmm_(grad_all[t, :, 2 * size:], weight_hh)
    return grad_all, carry.masked_fill_(saved.resets[0, :, None] != 0, 0.0)

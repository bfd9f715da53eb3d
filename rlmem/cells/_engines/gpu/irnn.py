r"""iRNN's Triton kernels, shared with ERNN: a chunk's rounds of K Euler steps in one launch,
forward and backward.

Both cells iterate towards an equilibrium of :math:`\phi(A z + d_t) = \alpha z` from a base
state :math:`b` and a start :math:`g_0`, with :math:`z_i = g_i + b`:

.. math::
    g_{i+1} = g_i + \eta_i \big(\phi(A z_i + d_t) - \alpha z_i\big), \quad i = 0, \dots, K-1

- iRNN (:class:`~rlmem.cells.irnn.IncrementalRNN`): :math:`b = h_{t-1}`, :math:`g_0 = 0`,
  :math:`h_t = g_K`;
- ERNN (:class:`~rlmem.cells.ernn.ERNN`): :math:`b = 0`, :math:`g_0 = h_{t-1}`, α = 1,
  :math:`h_t = g_K` (:mod:`.ernn` calls these kernels so).

A program owns a block of :data:`BLOCK_BATCH` batch rows and walks every step of the chunk
with the state in registers; :math:`A z` is a ``tl.dot`` with a tile of :math:`A^\top` read
from the cache. The product :math:`A h_{t-1}` that the first Euler step reads is the one the
residual trace of step t - 1 needs (:math:`\phi(A h_t + \dots)`): computed once, at the end of
step t - 1 (the engines' sharing). A reset zeroes the incoming state and that product
(:math:`A \cdot 0 = 0`), and cuts the gradient.

The backward pass walks the steps in reverse, with :math:`\bar a_i = \phi'_i \odot \eta_i
\bar g_{i+1}`: :math:`\bar z_i = \bar a_i A - \alpha \eta_i \bar g_{i+1}`,
:math:`\bar g_i = \bar g_{i+1} + \bar z_i`, :math:`\bar d_t = \sum_i \bar a_i`,
:math:`\bar\eta_i = \sum \bar g_{i+1} \odot (\phi_i - \alpha z_i)`,
:math:`\bar\alpha = -\sum_i \eta_i \bar g_{i+1} \odot z_i`, and the incoming state's gradient
:math:`\sum_i \bar z_i` (iRNN) or :math:`\bar g_0` (ERNN). :math:`A^\top`'s gradient,
:math:`\sum z_i^\top \bar a_i` over the chunk, is one cuBLAS matmul after the loop.

Register pressure bounds the hidden size: above :data:`MAX_SIZE` the engines run their Python
loops (:func:`~rlmem.cells._engines.gpu.fallback`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from rlmem.cells._engines import gpu

MAX_SIZE = 128
"""The largest hidden size the kernels hold in registers."""

BLOCK_BATCH = 16
"""Batch rows per program (``tl.dot`` needs blocks of at least 16)."""

PHI_KINDS: dict[Callable[[Tensor], Tensor], int] = {torch.tanh: 0, torch.relu: 1,
                                                     torch.sigmoid: 2}
"""The φ of :data:`rlmem.cells.activations.NONLINEARITIES` the kernels compute, by number."""


def block_size(size: int) -> int:
    """The padded block of a hidden size: a power of two, at least 16 (``tl.dot``'s least)."""
    return max(16, triton.next_power_of_2(size))


@triton.jit
def _phi(pre, PHI: tl.constexpr):
    """φ: tanh (as :math:`2\\sigma(2a) - 1`), relu or sigmoid."""
    if PHI == 0:
        return 2.0 * tl.sigmoid(2.0 * pre) - 1.0
    if PHI == 1:
        return tl.maximum(pre, 0.0)
    return tl.sigmoid(pre)


@triton.jit
def _phi_slope(value, PHI: tl.constexpr):
    """φ' from φ's value."""
    if PHI == 0:
        return 1.0 - value * value
    if PHI == 1:
        return tl.where(value > 0.0, 1.0, 0.0).to(value.dtype)
    return value - value * value


@triton.jit
def _rows(batch, size, BLOCK_B: tl.constexpr, BLOCK: tl.constexpr):
    """This program's rows: their indices, mask, and offsets into a ``(B, D)`` array."""
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, BLOCK)
    row_in = rows < batch
    mask = row_in[:, None] & (cols < size)[None, :]
    return rows, row_in, mask, rows[:, None] * size + cols[None, :]


@triton.jit
def _square(pointer, size, BLOCK: tl.constexpr, TRANSPOSE: tl.constexpr):
    """A row-major ``(size, size)`` matrix as a zero-padded ``(BLOCK, BLOCK)`` tile."""
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < size) & (cols < size)
    if TRANSPOSE:
        return tl.load(pointer + cols * size + rows, mask=mask, other=0.0)
    return tl.load(pointer + rows * size + cols, mask=mask, other=0.0)


@triton.jit
def _round_forward(g, base, first, drive, weight, eta, alpha, saved, offsets, mask, plane,
                   K: tl.constexpr, PHI: tl.constexpr):
    """One step's K Euler steps from :math:`g_0`; writes each :math:`z_i` and
    :math:`\\phi_i` (``saved``: this step's z's, the φ's ``plane·K`` further on)."""
    for i in tl.static_range(K):
        total = g + base
        if i == 0:
            pre = first  # A z_0 + d, from the product of the step before
        else:
            pre = tl.dot(total, weight, input_precision="ieee") + drive
        value = _phi(pre, PHI)
        tl.store(saved + i * plane + offsets, total, mask=mask)
        tl.store(saved + (K + i) * plane + offsets, value, mask=mask)
        g = g + tl.load(eta + i) * (value - alpha * total)
    return g


@triton.jit
def _forward_kernel(drives, h0, resets, weight_t, eta, alpha_pointer, y, residual, saved,
                    batch, size, STEPS: tl.constexpr, K: tl.constexpr, PHI: tl.constexpr,
                    INCREMENTAL: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK: tl.constexpr):
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk."""
    rows, row_in, mask, offsets = _rows(batch, size, BLOCK_B, BLOCK)
    plane = batch * size  # one (B, D) slab; saved is (T, 2K, B, D): z_i, then φ_i
    alpha = tl.load(alpha_pointer)
    h = tl.load(h0 + offsets, mask=mask, other=0.0)
    product = tl.dot(h, _square(weight_t, size, BLOCK, False), input_precision="ieee")
    for t in range(STEPS):
        weight = _square(weight_t, size, BLOCK, False)  # from the cache at each step
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        h = tl.where(reset[:, None], 0.0, h)
        product = tl.where(reset[:, None], 0.0, product)  # A·0, exactly
        drive = tl.load(drives + t * plane + offsets, mask=mask, other=0.0)
        first = product + drive
        if INCREMENTAL:
            base, g = h, tl.zeros_like(h)
        else:
            base, g = tl.zeros_like(h), h
        g = _round_forward(g, base, first, drive, weight, eta, alpha, saved + t * 2 * K * plane,
                           offsets, mask, plane, K, PHI)
        g = tl.where(mask, g, 0.0)  # padding stays 0
        tl.store(y + t * plane + offsets, g, mask=mask)
        # the residual trace φ(A (g + b) + d) - α (g + b), A g being the next step's product
        product = tl.dot(g, weight, input_precision="ieee")
        if INCREMENTAL:
            gap = _phi(product + first, PHI) - alpha * (g + base)
        else:
            gap = _phi(product + drive, PHI) - alpha * g
        gap = tl.where(mask, gap, 0.0)
        tl.store(residual + t * batch + rows, tl.sqrt(tl.sum(gap * gap, axis=1)), mask=row_in)
        h = g


@triton.jit
def _round_backward(grad_g, weight, eta, alpha, saved, grad_pre, eta_terms, offsets, mask,
                    plane, K: tl.constexpr, PHI: tl.constexpr):
    r"""One step's K Euler steps in reverse from :math:`\bar g_K`: returns :math:`\bar g_0`,
    :math:`\sum_i \bar z_i`, :math:`\sum_i \bar a_i` and the step's terms of
    :math:`\bar\alpha`; writes each :math:`\bar a_i`, adds η's terms."""
    sum_total = tl.zeros_like(grad_g)
    sum_pre = tl.zeros_like(grad_g)
    alpha_terms = tl.zeros_like(grad_g)
    for step in tl.static_range(K):
        i = K - 1 - step
        total = tl.load(saved + i * plane + offsets, mask=mask, other=0.0)
        value = tl.load(saved + (K + i) * plane + offsets, mask=mask, other=0.0)
        eta_i = tl.load(eta + i)
        terms = eta_terms + i * plane + offsets
        tl.store(terms, tl.load(terms, mask=mask, other=0.0) + grad_g * (value - alpha * total),
                 mask=mask)
        step_grad = eta_i * grad_g
        pre = step_grad * _phi_slope(value, PHI)
        tl.store(grad_pre + i * plane + offsets, pre, mask=mask)
        alpha_terms -= step_grad * total
        grad_total = tl.dot(pre, weight, input_precision="ieee") - alpha * step_grad
        sum_total += grad_total
        sum_pre += pre
        grad_g = grad_g + grad_total
    return grad_g, sum_total, sum_pre, alpha_terms


@triton.jit
def _backward_kernel(grad_y, resets, weight_t, eta, alpha_pointer, saved, grad_pre,
                     grad_drives, grad_h0, eta_terms, alpha_terms, batch, size,
                     STEPS: tl.constexpr, K: tl.constexpr, PHI: tl.constexpr,
                     INCREMENTAL: tl.constexpr, BLOCK_B: tl.constexpr, BLOCK: tl.constexpr):
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk, in reverse."""
    rows, row_in, mask, offsets = _rows(batch, size, BLOCK_B, BLOCK)
    plane = batch * size
    alpha = tl.load(alpha_pointer)
    carried = tl.zeros([BLOCK_B, BLOCK], dtype=grad_y.dtype.element_ty)
    alpha_sum = tl.zeros([BLOCK_B, BLOCK], dtype=grad_y.dtype.element_ty)
    for step in range(STEPS):
        t = STEPS - 1 - step
        grad_g = tl.load(grad_y + t * plane + offsets, mask=mask, other=0.0) + carried
        weight = _square(weight_t, size, BLOCK, True)  # A, for z̄ = ā A
        grad_g, sum_total, sum_pre, alpha_step = _round_backward(
            grad_g, weight, eta, alpha, saved + t * 2 * K * plane, grad_pre + t * K * plane,
            eta_terms, offsets, mask, plane, K, PHI)
        tl.store(grad_drives + t * plane + offsets, sum_pre, mask=mask)
        alpha_sum += alpha_step
        carried = sum_total if INCREMENTAL else grad_g
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        carried = tl.where(reset[:, None], 0.0, carried)
    tl.store(grad_h0 + offsets, carried, mask=mask)
    tl.store(alpha_terms + offsets, alpha_sum, mask=mask)


def _launch_shape(batch: int, size: int) -> dict[str, int]:
    return {"BLOCK_B": BLOCK_BATCH, "BLOCK": block_size(size)}


class EquilibriumScan(torch.autograd.Function):
    r"""A chunk's rounds (the module's docstring) in one kernel, with a hand-written backward
    in one kernel and one matmul.

    Shapes:
        - drives: ``(T, B, D)``; h0: ``(B, D)``; weight_t: :math:`A^\top` ``(D, D)``
        - eta: ``(K,)``; alpha: a scalar (or ``(1,)``); resets: ``(T, B)`` bool
        - returns y ``(T, B, D)`` and the residual norms ``(T, B)`` (a trace, not
          differentiable)
    """

    @staticmethod
    def forward(ctx: Any, drives: Tensor, h0: Tensor, weight_t: Tensor, eta: Tensor,
                alpha: Tensor, resets: Tensor, phi: int, incremental: bool
                ) -> tuple[Tensor, Tensor]:
        steps, batch, size = drives.shape
        K = len(eta)
        drives, weight_t, eta = drives.contiguous(), weight_t.contiguous(), eta.contiguous()
        alpha_shape, alpha = alpha.shape, alpha.reshape(1)
        resets = resets.contiguous().view(torch.uint8)
        y = drives.new_empty(steps, batch, size)
        residual = drives.new_empty(steps, batch)
        saved = drives.new_empty(steps, 2 * K, batch, size)
        _forward_kernel[(triton.cdiv(batch, BLOCK_BATCH),)](
            drives, h0.contiguous(), resets, weight_t, eta, alpha, y, residual, saved, batch,
            size, STEPS=steps, K=K, PHI=phi, INCREMENTAL=incremental,
            **_launch_shape(batch, size))
        ctx.phi, ctx.incremental, ctx.alpha_shape = phi, incremental, alpha_shape
        ctx.mark_non_differentiable(residual)
        ctx.save_for_backward(resets, weight_t, eta, alpha, saved)
        return y, residual

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_y: Tensor, _grad_residual: Tensor | None
                 ) -> tuple[Tensor | None, ...]:
        resets, weight_t, eta, alpha, saved = ctx.saved_tensors
        steps, batch, size = grad_y.shape
        K = len(eta)
        grad_pre = grad_y.new_empty(steps, K, batch, size)
        grad_drives = torch.empty_like(grad_y)
        grad_h0 = grad_y.new_empty(batch, size)
        eta_terms = grad_y.new_zeros(K, batch, size)
        alpha_terms = grad_y.new_empty(batch, size)
        _backward_kernel[(triton.cdiv(batch, BLOCK_BATCH),)](
            grad_y.contiguous(), resets, weight_t, eta, alpha, saved, grad_pre, grad_drives,
            grad_h0, eta_terms, alpha_terms, batch, size, STEPS=steps, K=K, PHI=ctx.phi,
            INCREMENTAL=ctx.incremental, **_launch_shape(batch, size))
        needs = ctx.needs_input_grad
        totals = saved[:, :K].reshape(-1, size)
        grad_weight_t = totals.T @ grad_pre.view(-1, size) if needs[2] else None
        grad_alpha = alpha_terms.sum().reshape(ctx.alpha_shape) if needs[4] else None
        return (grad_drives if needs[0] else None, grad_h0 if needs[1] else None,
                grad_weight_t, eta_terms.sum((1, 2)) if needs[3] else None, grad_alpha, None,
                None, None)


def phi_kind(phi: Callable[[Tensor], Tensor], size: int, engine: str) -> int | None:
    """The kernels' number for φ, or ``None`` (with :func:`~rlmem.cells._engines.gpu.fallback`
    saying why) where they cannot compute a chunk of this hidden size with this φ."""
    if size > MAX_SIZE:
        gpu.fallback(engine, f"hidden size {size} is above the kernels' {MAX_SIZE}")
        return None
    kind = PHI_KINDS.get(phi)
    if kind is None:
        gpu.fallback(engine, f"the kernels compute tanh, relu or sigmoid, not {phi!r}")
    return kind


def scan(drives: Tensor, h0: Tensor, weight_t: Tensor, eta: Tensor, alpha: Tensor,
         resets: Tensor, phi: int, *, incremental: bool) -> tuple[Tensor, Tensor]:
    """The rounds of a chunk through :class:`EquilibriumScan`: y ``(T, B, D)`` and the
    residual norms ``(T, B)``; ``incremental`` picks iRNN's form, else ERNN's."""
    result: tuple[Tensor, Tensor] = EquilibriumScan.apply(drives, h0, weight_t, eta, alpha,
                                                          resets, phi, incremental)
    return result

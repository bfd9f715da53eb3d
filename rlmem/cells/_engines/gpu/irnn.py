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
with the state in registers; :math:`A z` is a ``tl.dot`` over slices of :math:`A^\top` read
from the cache (:func:`product`). The product :math:`A h_{t-1}` that the first Euler step
reads is the one the residual trace of step t - 1 needs (:math:`\phi(A h_t + \dots)`):
computed once, at the end of step t - 1 (the engines' sharing). A reset zeroes the incoming
state and that product (:math:`A \cdot 0 = 0`), and cuts the gradient.

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

MAX_SIZE = 128
"""The largest hidden size the kernels hold in registers."""

BLOCK_BATCH = 16
"""Batch rows per program (``tl.dot`` needs blocks of at least 16)."""

LAUNCH = {"num_warps": 8, "num_stages": 1}
"""The launch options of every kernel here and in :mod:`.tarnn`: one stage (software
pipelining the loads of the weights multiplies their shared memory, and the loop's steps
depend on each other anyway); at hidden 128 in float32, 8 warps hold every kernel's values
in registers without spilling (ptxas, sm_90a)."""

FLOAT32_PRODUCTS = tl.constexpr("ieee")
"""``tl.dot``'s precision in float32: IEEE products (Triton's default, TF32, rounds the inputs
to 10 bits of mantissa, which the CPU engines do not); ``"tf32x3"`` would run them on the
tensor cores at about float32's accuracy."""

PHI_KINDS: dict[Callable[[Tensor], Tensor], int] = {torch.tanh: 0, torch.relu: 1,
                                                     torch.sigmoid: 2}
"""The φ of :data:`rlmem.cells.activations.NONLINEARITIES` the kernels compute, by number."""


def block_size(size: int) -> int:
    """The padded block of a hidden size: a power of two, at least 16 (``tl.dot``'s least)."""
    return max(16, triton.next_power_of_2(size))


@triton.jit
def _phi(pre: tl.tensor, PHI: tl.constexpr) -> tl.tensor:
    """φ: tanh (as :math:`2\\sigma(2a) - 1`), relu or sigmoid."""
    if PHI == 0:
        return 2.0 * tl.sigmoid(2.0 * pre) - 1.0
    if PHI == 1:
        return tl.maximum(pre, 0.0)
    return tl.sigmoid(pre)


@triton.jit
def _phi_slope(value: tl.tensor, PHI: tl.constexpr) -> tl.tensor:
    """φ' from φ's value."""
    if PHI == 0:
        return 1.0 - value * value
    if PHI == 1:
        return tl.where(value > 0.0, 1.0, 0.0).to(value.dtype)
    return value - value * value


@triton.jit
def dot(a: tl.tensor, b: tl.tensor) -> tl.tensor:
    """``a @ b``. In float64 as a sum of products: Triton's float64 MMA fails to compile
    where an operand is a loop-carried product (3.6, "fp64 don't support largeK MMA")."""
    if a.dtype == tl.float64:
        return tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    return tl.dot(a, b, input_precision=FLOAT32_PRODUCTS)


@triton.jit
def block_rows(batch: tl.tensor, size: tl.tensor, BLOCK_B: tl.constexpr,
          BLOCK: tl.constexpr) -> tl.tensor:
    """This program's rows: their indices, mask, and offsets into a ``(B, D)`` array."""
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, BLOCK)
    row_in = rows < batch
    mask = row_in[:, None] & (cols < size)[None, :]
    return rows, row_in, mask, rows[:, None] * size + cols[None, :]


CHUNK = tl.constexpr(16)
"""The width of the slices of the contraction in :func:`product` (``tl.dot``'s least)."""


@triton.jit
def product(a: tl.tensor, weight: tl.tensor, scratch: tl.tensor, size: tl.tensor,
            TRANSPOSE: tl.constexpr) -> tl.tensor:
    """``a @ W`` (W the row-major ``(size, size)`` matrix at ``weight``, or its transpose),
    contracted in slices of :data:`CHUNK`: ``a`` passes through this program's ``scratch``
    rows, so that no operand holds a whole ``(D, D)`` tile (which spills registers)."""
    BLOCK_B: tl.constexpr = a.shape[0]
    BLOCK: tl.constexpr = a.shape[1]
    rows = tl.arange(0, BLOCK_B)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    part = tl.arange(0, CHUNK)
    tl.debug_barrier()  # every thread is done reading the scratch rows
    tl.store(scratch + rows * BLOCK + cols, a)
    tl.debug_barrier()
    result = tl.zeros([BLOCK_B, BLOCK], dtype=a.dtype)
    for start in range(0, BLOCK, CHUNK):
        a_part = tl.load(scratch + rows * BLOCK + (start + part)[None, :])
        inner = (start + part)[:, None]
        mask = (inner < size) & (cols < size)
        at = weight + (cols * size + inner if TRANSPOSE else inner * size + cols)
        result += dot(a_part, tl.load(at, mask=mask, other=0.0))
    return result


@triton.jit
def _euler_step(g: tl.tensor, total: tl.tensor, pre: tl.tensor, eta: tl.tensor, alpha: tl.tensor,
                saved: tl.tensor, i: tl.tensor, offsets: tl.tensor, mask: tl.tensor,
                plane: tl.tensor, K: tl.constexpr, PHI: tl.constexpr,
                SAVE: tl.constexpr) -> tl.tensor:
    r"""Euler step i from φ's argument ``pre``; writes :math:`z_i` and :math:`\phi_i`
    (``saved``: this step's z's, the φ's ``plane·K`` further on)."""
    value = _phi(pre, PHI)
    if SAVE:  # for the backward pass
        tl.store(saved + i * plane + offsets, total, mask=mask)
        tl.store(saved + (K + i) * plane + offsets, value, mask=mask)
    return g + tl.load(eta + i) * (value - alpha * total)


@triton.jit
def _round_forward(g: tl.tensor, base: tl.tensor, first: tl.tensor, drive: tl.tensor,
                   weight: tl.tensor, scratch: tl.tensor, size: tl.tensor, eta: tl.tensor,
                   alpha: tl.tensor, saved: tl.tensor, offsets: tl.tensor, mask: tl.tensor,
                   plane: tl.tensor, K: tl.constexpr, PHI: tl.constexpr,
                   SAVE: tl.constexpr) -> tl.tensor:
    """One step's K Euler steps from :math:`g_0`; the first reads :math:`A z_0 + d`
    (``first``) from the product of the step before."""
    g = _euler_step(g, g + base, first, eta, alpha, saved, 0, offsets, mask, plane, K, PHI, SAVE)
    for i in range(1, K):  # a loop, not unrolled: the code of a product is large
        total = g + base
        pre = product(total, weight, scratch, size, False) + drive
        g = _euler_step(g, total, pre, eta, alpha, saved, i, offsets, mask, plane, K, PHI, SAVE)
    return g


@triton.jit(do_not_specialize=["steps"])
def _forward_kernel(drives: tl.tensor, h0: tl.tensor, resets: tl.tensor, weight_t: tl.tensor,
                    eta: tl.tensor, alpha_pointer: tl.tensor, y: tl.tensor, residual: tl.tensor,
                    saved: tl.tensor, scratch: tl.tensor, batch: tl.tensor, size: tl.tensor,
                    steps: tl.tensor, K: tl.constexpr, PHI: tl.constexpr,
                    INCREMENTAL: tl.constexpr, SAVE: tl.constexpr, BLOCK_B: tl.constexpr,
                    BLOCK: tl.constexpr) -> None:
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk."""
    rows, row_in, mask, offsets = block_rows(batch, size, BLOCK_B, BLOCK)
    plane = batch * size  # one (B, D) slab; saved is (T, 2K, B, D): z_i, then φ_i
    alpha = tl.load(alpha_pointer)
    scratch += tl.program_id(0) * BLOCK_B * BLOCK  # this program's rows
    h = tl.load(h0 + offsets, mask=mask, other=0.0)
    ahead = product(h, weight_t, scratch, size, False)  # A h
    t = 0
    while t < steps:  # a loop over a runtime count: one compilation for any T
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        h = tl.where(reset[:, None], 0.0, h)
        ahead = tl.where(reset[:, None], 0.0, ahead)  # A·0, exactly
        drive = tl.load(drives + t * plane + offsets, mask=mask, other=0.0)
        first = ahead + drive
        if INCREMENTAL:
            base, g = h, tl.zeros_like(h)
        else:
            base, g = tl.zeros_like(h), h
        g = _round_forward(g, base, first, drive, weight_t, scratch, size, eta, alpha,
                           saved + t * 2 * K * plane, offsets, mask, plane, K, PHI, SAVE)
        g = tl.where(mask, g, 0.0)  # padding stays 0
        tl.store(y + t * plane + offsets, g, mask=mask)
        # the residual trace φ(A (g + b) + d) - α (g + b), A g being the next step's product
        ahead = product(g, weight_t, scratch, size, False)
        if INCREMENTAL:
            gap = _phi(ahead + first, PHI) - alpha * (g + base)
        else:
            gap = _phi(ahead + drive, PHI) - alpha * g
        gap = tl.where(mask, gap, 0.0)
        tl.store(residual + t * batch + rows, tl.sqrt(tl.sum(gap * gap, axis=1)), mask=row_in)
        h = g
        t += 1


@triton.jit
def _round_backward(grad_g: tl.tensor, weight: tl.tensor, scratch: tl.tensor, size: tl.tensor,
                    eta: tl.tensor, alpha: tl.tensor, saved: tl.tensor, grad_pre: tl.tensor,
                    eta_terms: tl.tensor, offsets: tl.tensor, mask: tl.tensor, plane: tl.tensor,
                    K: tl.constexpr, PHI: tl.constexpr) -> tl.tensor:
    r"""One step's K Euler steps in reverse from :math:`\bar g_K`: returns :math:`\bar g_0`,
    :math:`\sum_i \bar z_i`, :math:`\sum_i \bar a_i` and the step's terms of
    :math:`\bar\alpha`; writes each :math:`\bar a_i`, adds η's terms."""
    sum_total = tl.zeros_like(grad_g)
    sum_pre = tl.zeros_like(grad_g)
    alpha_terms = tl.zeros_like(grad_g)
    for step in range(K):  # a loop, not unrolled: the code of a product is large
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
        grad_total = product(pre, weight, scratch, size, True) - alpha * step_grad  # ā A
        sum_total += grad_total
        sum_pre += pre
        grad_g = grad_g + grad_total
    return grad_g, sum_total, sum_pre, alpha_terms


@triton.jit(do_not_specialize=["steps"])
def _backward_kernel(grad_y: tl.tensor, resets: tl.tensor, weight_t: tl.tensor, eta: tl.tensor,
                     alpha_pointer: tl.tensor, saved: tl.tensor, grad_pre: tl.tensor,
                     grad_drives: tl.tensor, grad_h0: tl.tensor, eta_terms: tl.tensor,
                     alpha_terms: tl.tensor, scratch: tl.tensor, batch: tl.tensor,
                     size: tl.tensor, steps: tl.tensor, K: tl.constexpr, PHI: tl.constexpr,
                     INCREMENTAL: tl.constexpr, BLOCK_B: tl.constexpr,
                     BLOCK: tl.constexpr) -> None:
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk, in reverse."""
    rows, row_in, mask, offsets = block_rows(batch, size, BLOCK_B, BLOCK)
    plane = batch * size
    alpha = tl.load(alpha_pointer)
    scratch += tl.program_id(0) * BLOCK_B * BLOCK  # this program's rows
    carried = tl.zeros([BLOCK_B, BLOCK], dtype=grad_y.dtype.element_ty)
    alpha_sum = tl.zeros([BLOCK_B, BLOCK], dtype=grad_y.dtype.element_ty)
    t = steps - 1
    while t >= 0:
        grad_g = tl.load(grad_y + t * plane + offsets, mask=mask, other=0.0) + carried
        grad_g, sum_total, sum_pre, alpha_step = _round_backward(
            grad_g, weight_t, scratch, size, eta, alpha, saved + t * 2 * K * plane,
            grad_pre + t * K * plane, eta_terms, offsets, mask, plane, K, PHI)
        tl.store(grad_drives + t * plane + offsets, sum_pre, mask=mask)
        alpha_sum += alpha_step
        carried = sum_total if INCREMENTAL else grad_g
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        carried = tl.where(reset[:, None], 0.0, carried)
        t -= 1
    tl.store(grad_h0 + offsets, carried, mask=mask)
    tl.store(alpha_terms + offsets, alpha_sum, mask=mask)


def scratch_rows(like: Tensor, batch: int, size: int) -> Tensor:
    """The rows :func:`product` stages its left operand in: ``BLOCK_BATCH`` padded rows for
    each program."""
    return like.new_empty(triton.cdiv(batch, BLOCK_BATCH) * BLOCK_BATCH * block_size(size))


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
        save = any(ctx.needs_input_grad)  # without, a rollout's step writes only y
        saved = drives.new_empty((steps, 2 * K, batch, size) if save else (1,))
        _forward_kernel[(triton.cdiv(batch, BLOCK_BATCH),)](
            drives, h0.contiguous(), resets, weight_t, eta, alpha, y, residual, saved,
            scratch_rows(drives, batch, size), batch, size, steps=steps, K=K, PHI=phi,
            INCREMENTAL=incremental, SAVE=save, **LAUNCH, BLOCK_B=BLOCK_BATCH,
            BLOCK=block_size(size))
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
            grad_h0, eta_terms, alpha_terms, scratch_rows(grad_y, batch, size), batch, size,
            steps=steps, K=K, PHI=ctx.phi,
            INCREMENTAL=ctx.incremental, **LAUNCH, BLOCK_B=BLOCK_BATCH, BLOCK=block_size(size))
        needs = ctx.needs_input_grad
        totals = saved[:, :K].reshape(-1, size)
        grad_weight_t = totals.T @ grad_pre.view(-1, size) if needs[2] else None
        grad_alpha = alpha_terms.sum().reshape(ctx.alpha_shape) if needs[4] else None
        return (grad_drives if needs[0] else None, grad_h0 if needs[1] else None,
                grad_weight_t, eta_terms.sum((1, 2)) if needs[3] else None, grad_alpha, None,
                None, None)


def uncovered(size: int, phi: Callable[[Tensor], Tensor]) -> str | None:
    """Why the kernels cannot compute a chunk of hidden ``size`` with ``phi``, or ``None``
    (for :func:`~rlmem.cells._engines.gpu.kernels`)."""
    if size > MAX_SIZE:
        return f"hidden size {size} is above the kernels' {MAX_SIZE}"
    if phi not in PHI_KINDS:
        return f"the kernels compute tanh, relu or sigmoid, not {phi!r}"
    return None


def scan(drives: Tensor, h0: Tensor, weight_t: Tensor, eta: Tensor, alpha: Tensor,
         resets: Tensor, phi: Callable[[Tensor], Tensor], *, incremental: bool
         ) -> tuple[Tensor, Tensor]:
    """The rounds of a chunk through :class:`EquilibriumScan`: y ``(T, B, D)`` and the
    residual norms ``(T, B)``; ``incremental`` picks iRNN's form, else ERNN's."""
    result: tuple[Tensor, Tensor] = EquilibriumScan.apply(drives, h0, weight_t, eta, alpha,
                                                          resets, PHI_KINDS[phi], incremental)
    return result

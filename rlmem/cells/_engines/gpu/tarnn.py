r"""TARNN's Triton kernels: the whole time loop of a chunk in one launch, forward and backward.

The same loops as :class:`~rlmem.cells._engines.tarnn.TARNNScan`'s (its docstring has the
math), and with the same signatures and buffers as the compiled ``tarnn_forward`` and
``tarnn_backward`` (``csrc/tarnn.h``), so that the engine calls whichever runs. Each program
owns a block of :data:`BLOCK_BATCH` batch rows and walks every time step and every Euler step
of the chunk with the state in registers; the products with the state weights and with U are
``tl.dot`` on slices of the weights read from the cache at each step (:func:`.irnn.product`). A
reset zeroes the incoming state of its rows (forward) and cuts the gradient that leaves a
step (backward), the rule of :mod:`rlmem.cells.resets`. :math:`A z` of the coupled form,
which moves the upper half of :math:`z` to the lower, reads :math:`z` back from the program's
scratch rows shifted by D/2 (exact).

What sums over time (U's and the state weights' gradients) is left to cuBLAS after the loop,
from the buffers the loop writes: ``grad_pre`` (:math:`\bar a_k`) and the saved :math:`z_k`.

Register pressure bounds the hidden size: a program holds several ``(16, D)`` blocks; above
:data:`MAX_SIZE` the engine runs its Python loops (:func:`~rlmem.cells._engines.gpu.fallback`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from rlmem.cells._engines.gpu.irnn import (
    BLOCK_BATCH,
    LAUNCH,
    block_rows,
    block_size,
    product,
    scratch_rows,
)

MAX_SIZE = 128
"""The largest hidden size the kernels hold in registers."""


def uncovered(size: int) -> str | None:
    """Why the kernels cannot compute a chunk of hidden ``size``, or ``None`` (for
    :func:`~rlmem.cells._engines.gpu.kernels`)."""
    return f"hidden size {size} is above the kernels' {MAX_SIZE}" if size > MAX_SIZE else None

@triton.jit
def _shifted(a: tl.tensor, scratch: tl.tensor, half: tl.tensor, UP: tl.constexpr) -> tl.tensor:
    """``a`` with column ``j + half`` moved to ``j`` (``UP``: :math:`A z`'s coupling), or
    column ``j`` to ``j + half`` (its transpose), zeros elsewhere; through ``scratch``."""
    BLOCK_B: tl.constexpr = a.shape[0]
    BLOCK: tl.constexpr = a.shape[1]
    rows = tl.arange(0, BLOCK_B)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    tl.debug_barrier()  # every thread is done reading the scratch rows
    tl.store(scratch + rows * BLOCK + cols, a)
    tl.debug_barrier()
    source = cols + half if UP else cols - half
    inside = cols < half if UP else (cols >= half) & (cols < 2 * half)
    return tl.load(scratch + rows * BLOCK + source, mask=inside, other=0.0)


@triton.jit
def _inner(pre: tl.tensor, SIGMOID: tl.constexpr) -> tl.tensor:
    """The kernel h of φ's fast form (:mod:`~rlmem.cells._engines.fast_forms`)."""
    if SIGMOID:
        return tl.sigmoid(pre)
    return tl.maximum(pre, 0.0)


@triton.jit
def _inner_slope(h: tl.tensor, SIGMOID: tl.constexpr) -> tl.tensor:
    """h' from h: σ - σ², or 1 where relu's output is positive."""
    if SIGMOID:
        return h - h * h
    return tl.where(h > 0.0, 1.0, 0.0).to(h.dtype)


@triton.jit
def _euler_forward(z: tl.tensor, beta: tl.tensor, drive_b: tl.tensor, drive_w: tl.tensor,
                   weight_u: tl.tensor, scratch: tl.tensor, eta: tl.tensor, saved: tl.tensor,
                   half: tl.tensor, offsets: tl.tensor, mask: tl.tensor, K: tl.constexpr,
                   COUPLED: tl.constexpr, SIGMOID: tl.constexpr, SCALE_OUT: tl.constexpr,
                   SAVE: tl.constexpr, BLOCK: tl.constexpr, STRIDE: tl.tensor) -> tl.tensor:
    """The K Euler steps of one time step from :math:`z_0`; each step's :math:`z_k`,
    :math:`h_k` and :math:`e_k` written to the saved buffers (``saved``: z's, at step 0)."""
    for k in range(K):  # a loop, not unrolled: the code of a product is large
        h = _inner(product(z, weight_u, scratch, STRIDE[0], True) + drive_w, SIGMOID)
        target = drive_b + SCALE_OUT * h
        if COUPLED:
            target += _shifted(z, scratch, half, True)
        if SAVE:  # for the backward pass
            at = saved + k * STRIDE[1] + offsets
            tl.store(at, z, mask=mask)
            tl.store(at + STRIDE[2], h, mask=mask)
            tl.store(at + 2 * STRIDE[2], target, mask=mask)
        z = z + tl.load(eta + k) * beta * (target - z)
    return z


@triton.jit(do_not_specialize=["steps"])
def _forward_kernel(inputs: tl.tensor, s0: tl.tensor, resets: tl.tensor, weight_s: tl.tensor,
                    weight_u: tl.tensor, eta: tl.tensor, y: tl.tensor, beta_all: tl.tensor,
                    saved: tl.tensor, scratch: tl.tensor, batch: tl.tensor, size: tl.tensor,
                    steps: tl.tensor, K: tl.constexpr, COUPLED: tl.constexpr, SIGMOID: tl.constexpr,
                    SCALE_OUT: tl.constexpr, SAVE: tl.constexpr, BLOCK_B: tl.constexpr,
                    BLOCK: tl.constexpr) -> None:
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk."""
    rows, row_in, mask, offsets = block_rows(batch, size, BLOCK_B, BLOCK)
    x_offsets = offsets + rows[:, None] * (2 * size)  # rows of (B, 3D)
    plane = batch * size  # one (B, D) slab; the saved buffers are (3, T, K, B, D)
    scratch += tl.program_id(0) * BLOCK_B * BLOCK  # this program's rows
    s = tl.load(s0 + offsets, mask=mask, other=0.0)
    t = 0
    while t < steps:  # a loop over a runtime count: one compilation for any T
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        s = tl.where(reset[:, None], 0.0, s)
        x_t = inputs + t * 3 * plane + x_offsets
        beta = tl.sigmoid(product(s, weight_s, scratch, size, True)
                          + tl.load(x_t, mask=mask, other=0.0))
        beta = tl.where(mask, beta, 0.0)  # padding stays 0: nothing there moves
        drive_b = (product(s, weight_s + size * size, scratch, size, True)
                   + tl.load(x_t + size, mask=mask, other=0.0))
        drive_w = (product(s, weight_s + 2 * size * size, scratch, size, True)
                   + tl.load(x_t + 2 * size, mask=mask, other=0.0))
        tl.store(beta_all + t * plane + offsets, beta, mask=mask)
        s = _euler_forward(s, beta, drive_b, drive_w, weight_u, scratch, eta,
                           saved + t * K * plane, size // 2, offsets, mask, K, COUPLED,
                           SIGMOID, SCALE_OUT, SAVE, BLOCK,
                           (size, plane, steps * K * plane))
        tl.store(y + t * plane + offsets, s, mask=mask)
        t += 1


def tarnn_forward(inputs: Tensor, s0: Tensor, resets: Tensor, weight_s_t: Tensor,
                  weight_u_t: Tensor, eta: Tensor, coupled: bool, inner_kind: int,
                  scale_out: float, y: Tensor, beta_all: Tensor, euler: Tensor,
                  inner_all: Tensor, targets: Tensor, onednn: bool = False, *,
                  save: bool = True) -> None:
    """The compiled ``tarnn_forward``'s loop in one launch: writes y, β and, with ``save``,
    per Euler step :math:`z_k`, :math:`h_k`, :math:`e_k` (``euler``, ``inner_all``,
    ``targets``: three consecutive ``(T, K, B, D)`` slabs of one buffer, as the engine carves
    them); without, a rollout's step writes only y and β. ``onednn`` is the compiled loops'
    choice of their CPU products' library (``csrc/products.h``), taken here to share their
    signature and not used.

    Shapes:
        - inputs: ``(T, B, 3D)``; s0: ``(B, D)``; resets: ``(T, B)`` bool
        - weight_s_t: ``(D, 3D)`` (the state weights, transposed); weight_u_t: ``(D, D)``
        - eta: ``(K,)``; y, beta_all: ``(T, B, D)``
    """
    steps, batch, size = y.shape
    _check_slabs(euler, inner_all, targets)
    grid = (triton.cdiv(batch, BLOCK_BATCH),)
    _forward_kernel[grid](
        inputs.contiguous(), s0.contiguous(), resets.contiguous().view(torch.uint8),
        weight_s_t.t().contiguous(), weight_u_t.t().contiguous(), eta.contiguous(), y,
        beta_all, euler, scratch_rows(y, batch, size), batch, size, steps=steps, K=len(eta),
        COUPLED=coupled,
        SIGMOID=inner_kind == 0, SCALE_OUT=float(scale_out), SAVE=save, **LAUNCH,
        BLOCK_B=BLOCK_BATCH, BLOCK=block_size(size))


def _check_slabs(euler: Tensor, inner_all: Tensor, targets: Tensor) -> None:
    """The kernels address the three saved tensors from ``euler``'s pointer: they must be
    consecutive contiguous slabs of one buffer (the engine's ``saved``)."""
    slab = euler.numel()
    for index, tensor in enumerate((euler, inner_all, targets)):
        if not tensor.is_contiguous() or tensor.data_ptr() != (
                euler.data_ptr() + index * slab * euler.element_size()):
            raise ValueError("TARNN's kernels need z_k, h_k and e_k in consecutive "
                             "contiguous slabs of one buffer")


@triton.jit
def _euler_backward(grad_z: tl.tensor, beta: tl.tensor, weight_u: tl.tensor, scratch: tl.tensor,
                    eta: tl.tensor, saved: tl.tensor, grad_pre: tl.tensor, eta_terms: tl.tensor,
                    half: tl.tensor, offsets: tl.tensor, mask: tl.tensor, K: tl.constexpr,
                    COUPLED: tl.constexpr, SIGMOID: tl.constexpr, BLOCK: tl.constexpr,
                    STRIDE: tl.tensor) -> tl.tensor:
    r"""The K Euler steps of one time step in reverse, from :math:`\bar z_K`: returns
    :math:`\bar z_0`, :math:`\bar\beta`, :math:`\sum_k q_k` and :math:`\sum_k \bar a_k`; writes
    each :math:`\bar a_k` and adds :math:`\beta \odot F_k \odot \bar z_{k+1}` to η's terms."""
    grad_beta = tl.zeros_like(grad_z)
    sum_q = tl.zeros_like(grad_z)
    sum_pre = tl.zeros_like(grad_z)
    for step in range(K):
        k = K - 1 - step
        at = saved + k * STRIDE[1] + offsets
        z = tl.load(at, mask=mask, other=0.0)
        h = tl.load(at + STRIDE[2], mask=mask, other=0.0)
        slope = tl.load(at + 2 * STRIDE[2], mask=mask, other=0.0) - z  # F_k
        eta_k = tl.load(eta + k)
        q = eta_k * beta * grad_z
        pre = q * _inner_slope(h, SIGMOID)
        grad_slope = slope * grad_z
        grad_beta += eta_k * grad_slope
        terms = eta_terms + k * STRIDE[3] + offsets
        tl.store(terms, tl.load(terms, mask=mask, other=0.0) + beta * grad_slope, mask=mask)
        tl.store(grad_pre + k * STRIDE[1] + offsets, pre, mask=mask)
        sum_q += q
        sum_pre += pre
        carried = grad_z - q
        if COUPLED:
            carried += _shifted(q, scratch, half, False)
        grad_z = carried + product(pre, weight_u, scratch, STRIDE[0], False)
    return grad_z, grad_beta, sum_q, sum_pre


@triton.jit(do_not_specialize=["steps"])
def _backward_kernel(grad_y: tl.tensor, resets: tl.tensor, weight_s: tl.tensor, weight_u: tl.tensor,
                     eta: tl.tensor, beta_all: tl.tensor, saved: tl.tensor, grad_pre: tl.tensor,
                     grad_gates: tl.tensor, grad_next: tl.tensor, eta_terms: tl.tensor,
                     scratch: tl.tensor, batch: tl.tensor, size: tl.tensor, steps: tl.tensor,
                     K: tl.constexpr, COUPLED: tl.constexpr, SIGMOID: tl.constexpr,
                     BLOCK_B: tl.constexpr, BLOCK: tl.constexpr) -> None:
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk, in reverse."""
    rows, row_in, mask, offsets = block_rows(batch, size, BLOCK_B, BLOCK)
    gate_offsets = offsets + rows[:, None] * (2 * size)  # rows of (B, 3D)
    plane = batch * size
    scratch += tl.program_id(0) * BLOCK_B * BLOCK  # this program's rows
    carried = tl.zeros([BLOCK_B, BLOCK], dtype=grad_y.dtype.element_ty)
    t = steps - 1
    while t >= 0:
        beta = tl.load(beta_all + t * plane + offsets, mask=mask, other=0.0)
        grad_z = tl.load(grad_y + t * plane + offsets, mask=mask, other=0.0) + carried
        grad_z, grad_beta, sum_q, sum_pre = _euler_backward(
            grad_z, beta, weight_u, scratch, eta, saved + t * K * plane, grad_pre + t * K * plane,
            eta_terms, size // 2, offsets, mask, K, COUPLED, SIGMOID, BLOCK,
            (size, plane, steps * K * plane, plane))
        grad_beta_pre = grad_beta * (beta - beta * beta)
        gates_t = grad_gates + t * 3 * plane + gate_offsets
        tl.store(gates_t, grad_beta_pre, mask=mask)
        tl.store(gates_t + size, sum_q, mask=mask)
        tl.store(gates_t + 2 * size, sum_pre, mask=mask)
        carried = (grad_z + product(grad_beta_pre, weight_s, scratch, size, False)
                   + product(sum_q, weight_s + size * size, scratch, size, False)
                   + product(sum_pre, weight_s + 2 * size * size, scratch, size, False))
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        carried = tl.where(reset[:, None], 0.0, carried)
        t -= 1
    tl.store(grad_next + offsets, carried, mask=mask)


def tarnn_backward(grad_y: Tensor, resets: Tensor, weight_s: Tensor, weight_u: Tensor,
                   eta: Tensor, beta_all: Tensor, euler: Tensor, inner_all: Tensor,
                   targets: Tensor, coupled: bool, inner_kind: int, onednn: bool = False
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The compiled ``tarnn_backward``'s loop in one launch, then U's gradient in one
    matmul: returns the gates' gradient ``(T, B, 3D)``, the incoming state's ``(B, D)``, U's
    ``(D, D)`` and η's terms ``(K, B, D)`` (:math:`\sum_t \beta \odot F_k \odot \bar z_{k+1}`).
    ``onednn``: as :func:`tarnn_forward` says, not used.

    Shapes:
        - grad_y, beta_all: ``(T, B, D)``; resets: ``(T, B)`` bool
        - weight_s: ``(3D, D)``; weight_u: ``(D, D)`` (both scaled as the engine's backward
          scales them); eta: ``(K,)``; euler, inner_all, targets: ``(T, K, B, D)``
    """
    steps, batch, size = grad_y.shape
    _check_slabs(euler, inner_all, targets)
    grad_pre = torch.empty_like(euler)
    grad_gates = grad_y.new_empty(steps, batch, 3 * size)
    grad_next = grad_y.new_empty(batch, size)
    eta_terms = grad_y.new_zeros(len(eta), batch, size)
    grid = (triton.cdiv(batch, BLOCK_BATCH),)
    _backward_kernel[grid](
        grad_y.contiguous(), resets.contiguous().view(torch.uint8), weight_s.contiguous(),
        weight_u.contiguous(), eta.contiguous(), beta_all.contiguous(), euler, grad_pre,
        grad_gates, grad_next, eta_terms, scratch_rows(grad_y, batch, size), batch, size,
        steps=steps, K=len(eta), COUPLED=coupled,
        SIGMOID=inner_kind == 0, **LAUNCH, BLOCK_B=BLOCK_BATCH, BLOCK=block_size(size))
    grad_weight_u = grad_pre.view(-1, size).T @ euler.reshape(-1, size)
    return grad_gates, grad_next, grad_weight_u, eta_terms

r"""TARNN's Triton kernels: the whole time loop of a chunk in one launch, forward and backward.

The same loops as :class:`~rlmem.cells._engines.tarnn.TARNNScan`'s (its docstring has the
math), and with the same signatures and buffers as the compiled ``tarnn_forward`` and
``tarnn_backward`` (``csrc/tarnn.h``), so that the engine calls whichever runs. Each program
owns a block of :data:`BLOCK_BATCH` batch rows and walks every time step and every Euler step
of the chunk with the state in registers; the products with the state weights and with U are
``tl.dot`` on tiles of the weights read from the cache at each step. A reset zeroes the
incoming state of its rows (forward) and cuts the gradient that leaves a step (backward),
the rule of :mod:`rlmem.cells.resets`. :math:`A z` of the coupled form, which moves the upper
half of :math:`z` to the lower, is a product with a 0/1 shift matrix (exact: each output is
one input times 1 plus zeros).

What sums over time (U's and the state weights' gradients) is left to cuBLAS after the loop,
from the buffers the loop writes: ``grad_pre`` (:math:`\bar a_k`) and the saved :math:`z_k`.

Register pressure bounds the hidden size: a tile of the weights is ``(D, D)``; above
:data:`MAX_SIZE` the engine runs its Python loops (:func:`~rlmem.cells._engines.gpu.fallback`).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

MAX_SIZE = 128
"""The largest hidden size the kernels hold in registers."""

BLOCK_BATCH = 16
"""Batch rows per program (``tl.dot`` needs blocks of at least 16)."""


def block_size(size: int) -> int:
    """The padded block of a hidden size: a power of two, at least 16 (``tl.dot``'s least)."""
    return max(16, triton.next_power_of_2(size))


@triton.jit
def _tile(pointer, block: tl.constexpr, size, BLOCK: tl.constexpr, TRANSPOSE: tl.constexpr):
    """Block ``block`` (rows ``block·size …``) of a row-major matrix with ``size`` columns, as
    a zero-padded ``(BLOCK, BLOCK)`` tile; transposed with ``TRANSPOSE``."""
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    mask = (rows < size) & (cols < size)
    if TRANSPOSE:
        return tl.load(pointer + (block * size + cols) * size + rows, mask=mask, other=0.0)
    return tl.load(pointer + (block * size + rows) * size + cols, mask=mask, other=0.0)


@triton.jit
def _shift(half, BLOCK: tl.constexpr, dtype: tl.constexpr, UP: tl.constexpr):
    """The 0/1 matrix whose product moves column ``j + half`` to ``j`` (``UP``), or column
    ``j`` to ``j + half`` (its transpose), of a row vector."""
    rows = tl.arange(0, BLOCK)[:, None]
    cols = tl.arange(0, BLOCK)[None, :]
    if UP:
        hit = (rows == cols + half) & (cols < half)
    else:
        hit = (cols == rows + half) & (rows < half)
    return tl.where(hit, 1.0, 0.0).to(dtype)


@triton.jit
def _dot(a, b):
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _inner(pre, SIGMOID: tl.constexpr):
    """The kernel h of φ's fast form (:mod:`~rlmem.cells._engines.fast_forms`)."""
    if SIGMOID:
        return tl.sigmoid(pre)
    return tl.maximum(pre, 0.0)


@triton.jit
def _inner_slope(h, SIGMOID: tl.constexpr):
    """h' from h: σ - σ², or 1 where relu's output is positive."""
    if SIGMOID:
        return h - h * h
    return tl.where(h > 0.0, 1.0, 0.0).to(h.dtype)


@triton.jit
def _euler_forward(z, beta, drive_b, drive_w, weight_u, eta, saved, half, offsets, mask,
                   K: tl.constexpr, COUPLED: tl.constexpr, SIGMOID: tl.constexpr,
                   SCALE_OUT: tl.constexpr, BLOCK: tl.constexpr, STRIDE):
    """The K Euler steps of one time step from :math:`z_0`; each step's :math:`z_k`,
    :math:`h_k` and :math:`e_k` written to the saved buffers (``saved``: z's, at step 0)."""
    u_t = _tile(weight_u, 0, STRIDE[0], BLOCK, True)
    if COUPLED:
        shift = _shift(half, BLOCK, z.dtype, True)
    for k in tl.static_range(K):
        h = _inner(_dot(z, u_t) + drive_w, SIGMOID)
        target = drive_b + SCALE_OUT * h
        if COUPLED:
            target += _dot(z, shift)
        at = saved + k * STRIDE[1] + offsets
        tl.store(at, z, mask=mask)
        tl.store(at + STRIDE[2], h, mask=mask)
        tl.store(at + 2 * STRIDE[2], target, mask=mask)
        z = z + tl.load(eta + k) * beta * (target - z)
    return z


@triton.jit
def _forward_kernel(inputs, s0, resets, weight_s, weight_u, eta, y, beta_all, saved,
                    batch, size, STEPS: tl.constexpr, K: tl.constexpr, COUPLED: tl.constexpr,
                    SIGMOID: tl.constexpr, SCALE_OUT: tl.constexpr, BLOCK_B: tl.constexpr,
                    BLOCK: tl.constexpr):
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk."""
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, BLOCK)
    row_in = rows < batch
    mask = row_in[:, None] & (cols < size)[None, :]
    offsets = rows[:, None] * size + cols[None, :]
    x_offsets = rows[:, None] * (3 * size) + cols[None, :]
    plane = batch * size  # one (B, D) slab; the saved buffers are (3, T, K, B, D)
    s = tl.load(s0 + offsets, mask=mask, other=0.0)
    for t in range(STEPS):
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        s = tl.where(reset[:, None], 0.0, s)
        x_t = inputs + t * 3 * plane + x_offsets
        beta = tl.sigmoid(_dot(s, _tile(weight_s, 0, size, BLOCK, True))
                          + tl.load(x_t, mask=mask, other=0.0))
        beta = tl.where(mask, beta, 0.0)  # padding stays 0: nothing there moves
        drive_b = (_dot(s, _tile(weight_s, 1, size, BLOCK, True))
                   + tl.load(x_t + size, mask=mask, other=0.0))
        drive_w = (_dot(s, _tile(weight_s, 2, size, BLOCK, True))
                   + tl.load(x_t + 2 * size, mask=mask, other=0.0))
        tl.store(beta_all + t * plane + offsets, beta, mask=mask)
        s = _euler_forward(s, beta, drive_b, drive_w, weight_u, eta, saved + t * K * plane,
                           size // 2, offsets, mask, K, COUPLED, SIGMOID, SCALE_OUT, BLOCK,
                           (size, plane, STEPS * K * plane))
        tl.store(y + t * plane + offsets, s, mask=mask)


def tarnn_forward(inputs: Tensor, s0: Tensor, resets: Tensor, weight_s_t: Tensor,
                  weight_u_t: Tensor, eta: Tensor, coupled: bool, inner_kind: int,
                  scale_out: float, y: Tensor, beta_all: Tensor, euler: Tensor,
                  inner_all: Tensor, targets: Tensor) -> None:
    """The compiled ``tarnn_forward``'s loop in one launch: writes y, β and per Euler step
    :math:`z_k`, :math:`h_k`, :math:`e_k` (``euler``, ``inner_all``, ``targets``: three
    consecutive ``(T, K, B, D)`` slabs of one buffer, as the engine carves them).

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
        beta_all, euler, batch, size, STEPS=steps, K=len(eta), COUPLED=coupled,
        SIGMOID=inner_kind == 0, SCALE_OUT=float(scale_out), BLOCK_B=BLOCK_BATCH,
        BLOCK=block_size(size))


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
def _euler_backward(grad_z, beta, weight_u, eta, saved, grad_pre, eta_terms, half, offsets,
                    mask, K: tl.constexpr, COUPLED: tl.constexpr, SIGMOID: tl.constexpr,
                    BLOCK: tl.constexpr, STRIDE):
    r"""The K Euler steps of one time step in reverse, from :math:`\bar z_K`: returns
    :math:`\bar z_0`, :math:`\bar\beta`, :math:`\sum_k q_k` and :math:`\sum_k \bar a_k`; writes
    each :math:`\bar a_k` and adds :math:`\beta \odot F_k \odot \bar z_{k+1}` to η's terms."""
    weight = _tile(weight_u, 0, STRIDE[0], BLOCK, False)
    if COUPLED:
        shift = _shift(half, BLOCK, grad_z.dtype, False)
    grad_beta = tl.zeros_like(grad_z)
    sum_q = tl.zeros_like(grad_z)
    sum_pre = tl.zeros_like(grad_z)
    for step in tl.static_range(K):
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
            carried += _dot(q, shift)
        grad_z = carried + _dot(pre, weight)
    return grad_z, grad_beta, sum_q, sum_pre


@triton.jit
def _backward_kernel(grad_y, resets, weight_s, weight_u, eta, beta_all, saved, grad_pre,
                     grad_gates, grad_next, eta_terms, batch, size, STEPS: tl.constexpr,
                     K: tl.constexpr,
                     COUPLED: tl.constexpr, SIGMOID: tl.constexpr, BLOCK_B: tl.constexpr,
                     BLOCK: tl.constexpr):
    """One program: rows ``[pid·BLOCK_B, …)`` through every step of the chunk, in reverse."""
    rows = tl.program_id(0) * BLOCK_B + tl.arange(0, BLOCK_B)
    cols = tl.arange(0, BLOCK)
    row_in = rows < batch
    mask = row_in[:, None] & (cols < size)[None, :]
    offsets = rows[:, None] * size + cols[None, :]
    gate_offsets = rows[:, None] * (3 * size) + cols[None, :]
    plane = batch * size
    carried = tl.zeros([BLOCK_B, BLOCK], dtype=grad_y.dtype.element_ty)
    for step in range(STEPS):
        t = STEPS - 1 - step
        beta = tl.load(beta_all + t * plane + offsets, mask=mask, other=0.0)
        grad_z = tl.load(grad_y + t * plane + offsets, mask=mask, other=0.0) + carried
        grad_z, grad_beta, sum_q, sum_pre = _euler_backward(
            grad_z, beta, weight_u, eta, saved + t * K * plane, grad_pre + t * K * plane,
            eta_terms, size // 2, offsets, mask, K, COUPLED, SIGMOID, BLOCK,
            (size, plane, STEPS * K * plane, plane))
        grad_beta_pre = grad_beta * (beta - beta * beta)
        gates_t = grad_gates + t * 3 * plane + gate_offsets
        tl.store(gates_t, grad_beta_pre, mask=mask)
        tl.store(gates_t + size, sum_q, mask=mask)
        tl.store(gates_t + 2 * size, sum_pre, mask=mask)
        carried = (grad_z + _dot(grad_beta_pre, _tile(weight_s, 0, size, BLOCK, False))
                   + _dot(sum_q, _tile(weight_s, 1, size, BLOCK, False))
                   + _dot(sum_pre, _tile(weight_s, 2, size, BLOCK, False)))
        reset = tl.load(resets + t * batch + rows, mask=row_in, other=0) != 0
        carried = tl.where(reset[:, None], 0.0, carried)
    tl.store(grad_next + offsets, carried, mask=mask)


def tarnn_backward(grad_y: Tensor, resets: Tensor, weight_s: Tensor, weight_u: Tensor,
                   eta: Tensor, beta_all: Tensor, euler: Tensor, inner_all: Tensor,
                   targets: Tensor, coupled: bool, inner_kind: int
                   ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    r"""The compiled ``tarnn_backward``'s loop in one launch, then U's gradient in one
    matmul: returns the gates' gradient ``(T, B, 3D)``, the incoming state's ``(B, D)``, U's
    ``(D, D)`` and η's terms ``(K, B, D)`` (:math:`\sum_t \beta \odot F_k \odot \bar z_{k+1}`).

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
        grad_gates, grad_next, eta_terms, batch, size, STEPS=steps, K=len(eta), COUPLED=coupled,
        SIGMOID=inner_kind == 0, BLOCK_B=BLOCK_BATCH, BLOCK=block_size(size))
    grad_weight_u = grad_pre.view(-1, size).T @ euler.reshape(-1, size)
    return grad_gates, grad_next, grad_weight_u, eta_terms

r"""A cell's whole-sequence products :math:`y = x W^\top + b` through oneDNN's matrix product on
the CPU, forward and backward, where torch's BLAS takes a slower path.

On the CPU torch computes a float32 ``functional.linear`` with its BLAS (MKL in the x86 wheels),
which on an AMD CPU runs its AVX2 code, while oneDNN, which torch ships for its convolutions and
RNNs (``torch.lstm``), runs AVX-512 where the CPU has it. On this project's 2-core AMD EPYC
(family 26, AVX-512), one thread, a product of 8,192 rows by 256 by 128 took 5.6 ms in MKL and
2.3 ms in oneDNN (233 against 96 GFLOP/s), forward and backward together 1.7-2.0x as fast for
the shapes of a supervised batch (``benchmarks/onednn_linear.py``,
``benchmarks/results/onednn_linear.md``); an LSTM, which runs in
oneDNN already, had that advantage over every cell whose products ran in MKL. The same product,
rounded in another order: ``tests/cells/test_onednn_linear.py`` holds outputs and gradients
within float32 rounding of ``functional.linear``'s.

Every cell but ``lstm`` and ``gru`` (whose whole step is torch's oneDNN kernel already) makes
its whole-sequence projections through :func:`linear` or :class:`Linear`. Inside
:func:`onednn_products` :func:`linear` takes oneDNN's product
(``mkldnn::_linear_pointwise``, the op torch's own compiler emits for a CPU linear) for a float32
product of at least :data:`MIN_PRODUCT` multiply-adds on the CPU; smaller ones (a PPO
minibatch's, a rollout step's) stay with ``functional.linear``, where oneDNN's set-up costs more
than it saves. The weight's gradient, whose left operand is the transposed gradient, which
oneDNN would copy first, takes the compiled loops' blocked product instead where the CPU has
AVX-512 (:func:`weight_gradient`). The compiled time loops of relstm, relrnn, memlstm and tarnn
do the same with their steps' products inside the context (:func:`in_onednn`,
``csrc/products.h``; their small ones in the blocked product on such a CPU). Outside the
context, in float64, on a GPU, or in a torch built without oneDNN, :func:`linear` is
``functional.linear`` and the loops' products are ATen's. Off by default, so that a cell
computes as it always did unless a caller asks: the supervised trainer does
(:mod:`rlmem.tasks.trainer`); our PPO does not, its products being below the bound and its
arithmetic under the learning checks of issue 59.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells._engines import compiled

MIN_PRODUCT = 1 << 21
"""The fewest multiply-adds (rows × inputs × outputs) for which oneDNN's product is taken: on
the machine above, 64 × 128 → 512 (4.2M) took 51 µs in oneDNN against 87 µs in MKL, 256 × 64 →
64 (1.0M) the same in both, and 16 × 64 → 256 twice as long in oneDNN."""

_ONEDNN: ContextVar[bool] = ContextVar("rlmem_onednn_products", default=False)


@contextmanager
def onednn_products(enabled: bool = True) -> Iterator[None]:
    """Inside (with ``enabled``), a cell's large float32 products on the CPU run in oneDNN
    (the module docstring). Set per thread: a thread that runs the cell enters it itself."""
    token = _ONEDNN.set(enabled)
    try:
        yield
    finally:
        _ONEDNN.reset(token)


def _available() -> bool:
    """Whether this torch has oneDNN and its linear op."""
    return bool(torch.backends.mkldnn.is_available()) and hasattr(torch.ops.mkldnn,
                                                                   "_linear_pointwise")


_AVAILABLE = _available()


def _dense(matrix: Tensor) -> Tensor:
    """``matrix``, or a contiguous copy unless it is contiguous or a contiguous matrix's
    transpose: oneDNN reads other strides through a slow path (the gradient of a sum, a
    zero-stride expand, took 5.5 s for the weight's gradient of an 8,192 × 256 → 128 product
    against 8 ms for its copy)."""
    if matrix.is_contiguous() or matrix.t().is_contiguous():
        return matrix
    return matrix.contiguous()


def _product(a: Tensor, b: Tensor, bias: Tensor | None = None) -> Tensor:
    """:math:`a b^\\top + \\text{bias}` in oneDNN; ``a`` ``(M, K)``, ``b`` ``(N, K)``, either
    may be a transposed view; any other layout is copied first."""
    result: Tensor = torch.ops.mkldnn._linear_pointwise(_dense(a), _dense(b), bias, "none",
                                                        [None], "")
    return result


class _OneDNNLinear(torch.autograd.Function):
    """``x W^T + b`` with its three gradients, each one oneDNN product (the bias's a sum)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _product(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        grad = _dense(grad)  # once here, not once per product (a sum's gradient is an expand)
        grad_x = _product(grad, weight.t()) if ctx.needs_input_grad[0] else None
        grad_weight = weight_gradient(x, grad) if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias


def weight_gradient(x: Tensor, grad: Tensor) -> Tensor:
    """:math:`g^\top x`, ``(out_features, in_features)``. On a CPU with AVX-512 the compiled
    loops' blocked product, which reads the transposed ``grad`` in place, where oneDNN's product
    copies its transposed input first: 1.1-1.5x as fast at a supervised batch's 8,192 rows
    (``benchmarks/onednn_linear.py``); else oneDNN's as :math:`(x^\top g)^\top` (rows of
    ``x``'s width: 1.4-3x as fast as :math:`g^\top x` when ``x`` is narrow, copy's 10 symbols
    in, and never slower on the shapes measured)."""
    native = compiled.blocked_ops(x)
    if native is not None:
        product: Tensor = native.product(grad.t(), x, None)
        return product
    return _product(x.t(), grad.t()).t()


def loop_weight_gradient(x: Tensor, grad: Tensor, onednn: bool) -> Tensor:
    """:math:`g^\top x` after a compiled time loop: :func:`weight_gradient` where the loop's
    products left ATen's (``onednn``, as :func:`in_onednn` decided at its forward), else as
    ATen computes it, bit for bit as before the context existed."""
    return weight_gradient(x, grad) if onednn else grad.t() @ x


def in_onednn(x: Tensor) -> bool:
    """Whether the compiled time loops' products over ``x`` go to oneDNN (``csrc/products.h``,
    each product of at least :data:`MIN_PRODUCT` multiply-adds): inside
    :func:`onednn_products`, float32, on the CPU, with this torch's oneDNN. A loop decides it
    at its forward and its backward follows the forward."""
    return (_ONEDNN.get() and _AVAILABLE and x.device.type == "cpu"
            and x.dtype == torch.float32)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``functional.linear(x, weight, bias)``, in oneDNN inside :func:`onednn_products` where
    the module docstring says.

    Shapes:
        - x: ``(*, in_features)``; weight: ``(out_features, in_features)``; bias:
          ``(out_features,)``
        - output: ``(*, out_features)``
    """
    # the context first: outside it (our PPO's acting steps) nothing else is looked at
    if (in_onednn(x) and weight.dtype == torch.float32
            and (bias is None or bias.dtype == torch.float32)
            and x.numel() // max(x.shape[-1], 1) * weight.numel() >= MIN_PRODUCT):
        flat: Tensor = _OneDNNLinear.apply(x.reshape(-1, x.shape[-1]), weight, bias)
        return flat.view(*x.shape[:-1], weight.shape[0])
    return functional.linear(x, weight, bias)


class Linear(nn.Linear):
    """``nn.Linear`` whose product is :func:`linear`'s: the same weights and state dict."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)

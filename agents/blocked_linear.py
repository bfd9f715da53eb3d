r"""The PPO model's own products :math:`y = x W^\top + b` (its actor's and critic's hidden
layers, its folded grid encoder's last two convolutions) in the compiled loops' blocked float32
product on a CPU with AVX-512 (``csrc/blocked_product.h``), forward and backward.

torch computes a float32 ``functional.linear`` in MKL, which on an AMD CPU runs its AVX2 code
and pays a set-up per call that is large beside a PPO minibatch's products (256 × 64 → 64): on
this project's AMD EPYC (family 26, one thread) the blocked loop took 0.67-0.84 of its time,
forward and backward, on the products of 32 outputs and more, and whole fast-preset updates
0.94 of theirs (``benchmarks/blocked_products.py``); narrower products stay with torch's
(:data:`MIN_OUTPUTS`).
The same products, rounded otherwise: each output is its bias plus the sum over the inner
dimension in order, in fused multiply-adds (``tests/agents/test_blocked_linear.py`` holds them
within float32 rounding of ``functional.linear``, outputs and gradients).

Inside :func:`blocked_products` (which :class:`~rlmem.agents.ppo.model.ActorCritic` enters
where ``agent.blocked_products`` is on), on the CPU, in float32, where the CPU runs the loop,
:func:`linear` takes it; anywhere else, and for the memory cells' own products (which read
:mod:`rlmem.cells._engines.onednn_linear` instead), ``functional.linear`` runs as before.
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
from rlmem.cells._engines.graph import needs_graph

_BLOCKED: ContextVar[bool] = ContextVar("rlmem_blocked_products", default=False)


@contextmanager
def blocked_products(enabled: bool = True) -> Iterator[None]:
    """Inside (with ``enabled``), :func:`linear` takes the blocked product where it runs (the
    module docstring). Set per thread: a thread that runs the model enters it itself."""
    token = _BLOCKED.set(enabled)
    try:
        yield
    finally:
        _BLOCKED.reset(token)


def blocked_native(x: Tensor) -> Any | None:
    """The compiled ops whose ``product`` is blocked, inside :func:`blocked_products` for a
    float32 ``x`` on a CPU that runs it; else ``None``."""
    return compiled.blocked_ops(x) if _BLOCKED.get() else None


class _Product(torch.autograd.Function):
    """``x Wᵀ + b`` and its three gradients, each product the blocked one (the bias's a sum)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None,
                native: Any) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias, ctx.native = bias is not None, native
        product: Tensor = native.product(x, weight.t(), bias)
        return product

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        native = ctx.native
        grad_x = native.product(grad, weight, None) if ctx.needs_input_grad[0] else None
        grad_weight = native.product(grad.t(), x, None) if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias, None


MIN_OUTPUTS = 16
"""The fewest output features for which :func:`linear` takes the blocked product: it computes
32 columns at a time, so a narrower product wastes most of each block, and torch's was the
faster at the actor's 7 outputs (forward 10.6 µs against 16.8) and the critic's 1 (4.4 against
15.3), where the blocked was at 32 outputs and more (``benchmarks/blocked_products.py``,
``benchmarks/results/blocked_products.md``)."""


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``functional.linear(x, weight, bias)``, in the blocked product where
    :func:`blocked_native` gives one and the product has at least :data:`MIN_OUTPUTS` outputs.

    Shapes:
        - x: ``(*, in_features)``; weight: ``(out_features, in_features)``; bias:
          ``(out_features,)``
        - output: ``(*, out_features)``
    """
    native = blocked_native(x) if weight.shape[0] >= MIN_OUTPUTS else None
    if native is None:
        return functional.linear(x, weight, bias)
    rows = x.reshape(-1, x.shape[-1])
    flat: Tensor = (_Product.apply(rows, weight, bias, native) if needs_graph((x, weight, bias))
                    else native.product(rows, weight.t(), bias))  # _Product's forward
    return flat.view(*x.shape[:-1], weight.shape[0])


class Linear(nn.Linear):
    """``nn.Linear`` whose product is :func:`linear`'s: the same weights and state dict."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)

r"""The grid encoder's embedding, first convolution, ReLU and max-pool computed as one table
lookup, on the CPU.

:class:`~rlmem.agents.minigrid_encoders.ImageEncoder` embeds each of a cell's C indices
(object, colour, state) as :math:`K` features, convolves the :math:`C K` channels with a
:math:`K_h \times K_w` kernel :math:`W` and bias :math:`b`, then takes the ReLU and the maximum
over each 2 × 2 window. The first two are linear, so with one table per kernel offset
:math:`o = (d_y, d_x)` and table row :math:`r` (of channel :math:`c(r)`),

.. math::

    U_{o, r} = W_{:, c(r), :, o}\, E_r \in \mathbb{R}^F,
    \qquad
    y_{n, i, j} = b + \sum_{o} \sum_{c} U_{o,\, \text{rows}[n,\, i + d_y,\, j + d_x,\, c]},

the convolution's output is :math:`K_h K_w C` looked-up rows added per position instead of
:math:`F \cdot C K \cdot K_h K_w` multiply-adds (MiniGrid's 2 × 2 kernel: 12 rows of 16
against 1,536 products), and the ReLU and the max-pool are taken as each position is summed,
keeping which position of its window each pooled feature came from. The backward adds each
pooled feature's gradient into the rows its maximum read, :math:`\partial L / \partial U`, and
autograd carries that through the table's einsum to :math:`W` and :math:`E`. Equal to the
modules in float64 (outputs and every gradient: ``tests/agents/test_grid_fold.py``; at equal
maxima both take the first, in row order); in float32 the sums are rounded in another order,
so a run that folds is not bit-exact with one that does not (``agent.folded_grid``).

The loops are compiled (``grid_fold.h`` in :mod:`rlmem.cells._engines.compiled`'s one
extension): in ATen's gather and scatter ops (``index_select``, ``index_add_``) the same fold
cost as much as the convolution it replaced (``benchmarks/results/fast_trainer.md``, sessions
67 and 70), because those ops pay per row what these loops pay per element. Where the
extension cannot run (a GPU, ``RLMEM_NO_EXTENSION``, no compiler), :func:`folded_first_block`
returns ``None`` and the encoder runs its modules.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from rlmem.agents.blocked_linear import blocked_native, linear
from rlmem.cells._engines import compiled
from rlmem.cells._engines.graph import needs_graph
from rlmem.cells._engines.weight_cache import prepared


def fold_table(weight: Tensor, embedding: Tensor, channel_of_row: Tensor) -> Tensor:
    """The table :math:`U` (see the module docstring) of a convolution over embedded indices.

    Args:
        weight: the convolution's weight, ``(F, C · K, K_h, K_w)``, input channel ``c · K + k``
            holding feature ``k`` of channel ``c``'s embedding.
        embedding: the embedding table, ``(R, K)``.
        channel_of_row: which channel each table row belongs to, ``(R,)`` int64.

    Shapes:
        - output: ``(K_h · K_w, R, F)``, offset ``o = d_y · K_w + d_x``
    """
    features, channels_by_size, kernel_height, kernel_width = weight.shape
    size = embedding.shape[1]
    per_channel = weight.reshape(features, channels_by_size // size, size,
                                 kernel_height * kernel_width)
    return torch.einsum("frko,rk->orf", per_channel[:, channel_of_row], embedding).contiguous()


class _GridFold(torch.autograd.Function):
    """``z = maxpool(ReLU(b + Σ_o Σ_c U[o, rows[..]]))`` (the module docstring), channels last.

    ``forward`` takes ``ctx`` itself rather than a ``setup_context``: with one, every ``apply``
    binds its arguments through ``inspect.signature``, a tenth of a millisecond per minibatch."""

    @staticmethod
    def forward(ctx: Any, rows: Tensor, table: Tensor, bias: Tensor, kernel_width: int,
                native: Any) -> tuple[Tensor, Tensor]:
        pooled, where = native.grid_fold_forward(rows, table, bias, kernel_width)
        ctx.save_for_backward(rows, where)
        ctx.mark_non_differentiable(where)
        ctx.shape = (table.shape[1], table.shape[0] // kernel_width, kernel_width)
        ctx.native = native
        return pooled, where

    @staticmethod
    def backward(ctx: Any, grad: Tensor, _: Tensor | None
                 ) -> tuple[None, Tensor, Tensor, None, None]:
        rows, where = ctx.saved_tensors
        table_rows, kernel_height, kernel_width = ctx.shape
        grad_table, grad_bias = ctx.native.grid_fold_backward(
            grad, rows, where, table_rows, kernel_height, kernel_width)
        return None, grad_table, grad_bias, None, None


def folded_first_block(rows: Tensor, embedding: nn.Embedding, convolution: nn.Conv2d,
                       channel_of_row: Tensor, *, owner: nn.Module | None = None
                       ) -> Tensor | None:
    """``MaxPool2d(2)(ReLU(convolution(embedded rows)))``, folded (the module docstring), or
    ``None`` where the compiled loops cannot run (then the caller runs its modules).

    Args:
        rows: each cell's table rows, ``(N, H, W, C)``, every value below the table's rows.
        embedding: the table of ``R`` rows of ``K`` features.
        convolution: stride 1, no padding, no dilation, one group, with a bias; its input
            channel ``c · K + k`` is feature ``k`` of channel ``c``.
        channel_of_row: which channel each table row belongs to, ``(R,)`` int64.
        owner: a module holding ``embedding`` and ``convolution``: without autograd (acting),
            the table is kept between calls until one of its parameters changes
            (:func:`rlmem.cells._engines.weight_cache.prepared`: an acting step at 16 envs
            need not pay an einsum for a table that only the weights change). None: made at
            every call.

    Shapes:
        - output: ``(N, (H - K_h + 1) // 2, (W - K_w + 1) // 2, F)``, channels last: the
          modules' output for these rows, permuted
    """
    native = compiled.ops(rows)
    if native is None:
        return None

    def build() -> Tensor:
        return fold_table(convolution.weight, embedding.weight, channel_of_row)

    table = (build() if owner is None
             else prepared(owner, build, (convolution.weight, embedding.weight)))
    bias = convolution.bias
    assert bias is not None  # ImageEncoder's convolutions have one
    arguments = (rows.long().contiguous(), table, bias, convolution.weight.shape[3])
    pooled: Tensor = (_GridFold.apply(*arguments, native) if needs_graph((table, bias))
                      else native.grid_fold_forward(*arguments))[0]  # _GridFold's forward
    return pooled


def last_convolution(x: Tensor, convolution: nn.Conv2d) -> Tensor:
    """``convolution`` of a channels-last ``x`` whose every window is the whole of it (an
    output of 1 × 1): one matrix product, the weight reordered to ``x``'s order; where oneDNN's
    convolution, forward and backward, costs several times its arithmetic per call. The
    product is :func:`rlmem.agents.blocked_linear.linear`'s (blocked inside
    ``blocked_products()`` where the CPU runs it).

    Shapes:
        - x: ``(N, K_h, K_w, C)``; output: ``(N, F)``
    """
    features = convolution.weight.shape[0]
    weight = convolution.weight.permute(0, 2, 3, 1).reshape(features, -1)  # (F, K_h, K_w, C)
    return linear(x.reshape(x.shape[0], -1), weight, convolution.bias)


class _WindowConvolution(torch.autograd.Function):
    """``ReLU(convolution(x))``, channels last, as one product over ``x``'s windows, compiled
    (``window_convolution.h``): forward and backward each one call."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor, native: Any,
                blocked: bool) -> Tensor:
        y, windows = native.window_convolution_forward(x, weight, bias, blocked)
        ctx.save_for_backward(y, windows, weight)
        ctx.size = (x.shape[1], x.shape[2])
        ctx.native, ctx.blocked = native, blocked
        return y

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor, Tensor, None, None]:
        y, windows, weight = ctx.saved_tensors
        grad_x, grad_weight, grad_bias = ctx.native.window_convolution_backward(
            grad.contiguous(), y, windows, weight, *ctx.size, ctx.blocked)
        return grad_x, grad_weight, grad_bias, None, None


def window_convolution(x: Tensor, convolution: nn.Conv2d) -> Tensor | None:
    """``ReLU(convolution(x))`` of a channels-last ``x``, as one matrix product over its
    windows, compiled: the encoder's second convolution, for which oneDNN's convolution cost
    several times its arithmetic per call (a PPO minibatch's 256 views of 3 × 3 × 16: 0.1 ms
    forward, 0.3 ms backward). The same function, rounded in another order; equal to the
    modules in float64 (``tests/agents/test_grid_fold.py``). Its products are the blocked ones
    inside :func:`rlmem.agents.blocked_linear.blocked_products` where the CPU runs them, else
    ATen's. ``None`` where the compiled loops cannot run.

    Args:
        x: channels last, ``(N, H, W, C)``.
        convolution: stride 1, no padding, no dilation, one group, with a bias.

    Shapes:
        - output: ``(N, H - K_h + 1, W - K_w + 1, F)``, channels last
    """
    native = compiled.ops(x)
    if native is None:
        return None
    assert convolution.bias is not None  # ImageEncoder's convolutions have one
    arguments = (x, convolution.weight, convolution.bias)
    blocked = blocked_native(x) is not None
    if needs_graph(arguments):
        y: Tensor = _WindowConvolution.apply(*arguments, native, blocked)
        return y
    return native.window_convolution_forward(*arguments, blocked)[0]  # its forward

r"""A GRU over a whole chunk in one call of the compiled loops, the episode resets inside it.

torch's GRU on the CPU is ATen's own loop (oneDNN fuses only its LSTM): per step a product and
the gates' elementwise calls, each paying ATen's dispatch, and
:func:`rlmem.cells._engines.fused_rnn.gru` calls it once per reset-free segment. Here the chunk
is one call (``csrc/gru_chunk.h``): the input terms of every step as one matrix product, then
the step loop in C++ (one small product and the gates' elementwise math per step, the resets
applied before the step), and a backward by hand, its weight gradients as a few large products
after the loop. The products are the compiled loops' ``product``: on a CPU with AVX-512, in
float32, the blocked loop of ``csrc/blocked_product.h``; else ATen's.

The step is ``torch.gru_cell``'s:

.. math::
    r_t &= \sigma(W_{ir} x_t + b_{ir} + W_{hr} h_{t-1} + b_{hr}) \qquad
    z_t = \sigma(W_{iz} x_t + b_{iz} + W_{hz} h_{t-1} + b_{hz}) \\
    n_t &= \tanh(W_{in} x_t + b_{in} + r_t \odot (W_{hn} h_{t-1} + b_{hn})) \qquad
    h_t = n_t + z_t \odot (h_{t-1} - n_t)

with :math:`\tanh a = 2\sigma(2a) - 1`: the same function, rounded otherwise.
``tests/cells/test_engines.py`` holds it equal to :func:`rlmem.cells.time_loop.scan` over
:meth:`rlmem.cells.gru.GRU.step` in float64 (outputs, states and every gradient, under resets),
and ``tests/cells/test_gru_chunk.py`` float32 within rounding of float64.

CPU only, and only where the compiled loops are available (:func:`compiled.ops`); the caller
falls back to :func:`~rlmem.cells._engines.fused_rnn.scan_segments` otherwise.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from rlmem.cells._engines import compiled
from rlmem.cells._engines.base_recurrence import previous_states


class GRULayout(NamedTuple):
    """A GRU's weights as the chunk reads them, made from ``nn.GRU``'s (:meth:`of`)."""

    w_ih_t: Tensor
    r""":math:`W_{ih}^\top`, ``(input_size, 3H)``, contiguous (the input terms' product)."""
    w_hh_t: Tensor
    r""":math:`W_{hh}^\top`, ``(H, 3H)``, contiguous (each step's product, read by rows)."""
    bias: Tensor
    """:math:`b_{ih}` plus :math:`b_{hr}, b_{hz}` in the r and z rows, ``(3H,)``."""
    b_hn: Tensor
    r""":math:`b_{hn}`, ``(H,)``: inside :math:`r \odot (W_{hn} h + b_{hn})`."""

    @classmethod
    def of(cls, w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor) -> GRULayout:
        """From ``nn.GRU``'s ``all_weights[0]``, by differentiable ops (the gradients reach
        the parameters through them). Without autograd a cell keeps it between calls
        (:func:`~rlmem.cells._engines.weight_cache.prepared`): laying out the two weights cost
        an acting step of 16 items more than the step itself."""
        hidden = w_hh.shape[1]
        bias = b_ih + torch.cat([b_hh[:2 * hidden], b_hh.new_zeros(hidden)])
        return cls(w_ih.t().contiguous(), w_hh.t().contiguous(), bias, b_hh[2 * hidden:])


class _GRUChunk(torch.autograd.Function):
    """The chunk's forward (``gru_chunk_forward``) and backward as one autograd node."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor, h0: Tensor, resets: Tensor, w_ih_t: Tensor,
                w_hh_t: Tensor, bias: Tensor, b_hn: Tensor, ops: Any) -> tuple[Tensor, Tensor]:
        steps, batch, _ = x.shape
        hidden = h0.shape[1]
        xp = ops.product(x.reshape(steps * batch, -1), w_ih_t, bias)
        act = x.new_empty(steps, batch, 3 * hidden)
        hn = x.new_empty(steps, batch, hidden)
        y = x.new_empty(steps, batch, hidden)
        ops.gru_chunk_forward(xp.view(steps, batch, 3 * hidden), h0, resets, w_hh_t, b_hn, act,
                              hn, y)
        ctx.save_for_backward(x, h0, resets, w_ih_t, w_hh_t, act, hn, y)
        ctx.ops = ops  # type: ignore[attr-defined]
        ctx.set_materialize_grads(False)
        return y, y[-1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, g_y: Tensor | None,
                 g_h: Tensor | None) -> tuple[Tensor | None, ...]:
        x, h0, resets, w_ih_t, w_hh_t, act, hn, y = ctx.saved_tensors  # type: ignore[attr-defined]
        steps, batch, hidden = y.shape
        empty = y.new_empty(0)
        s_prev = previous_states(torch.empty_like(y), h0, y, resets)
        d_input = y.new_empty(steps, batch, 3 * hidden)
        d_hidden = y.new_empty(steps, batch, 3 * hidden)
        dh0 = ctx.ops.gru_chunk_backward(  # type: ignore[attr-defined]
            empty if g_y is None else g_y, empty if g_h is None else g_h, resets, w_hh_t.t(),
            act, hn, s_prev, d_input, d_hidden)
        product = ctx.ops.product  # type: ignore[attr-defined]
        rows_in = d_input.view(steps * batch, 3 * hidden)
        rows_hidden = d_hidden.view(steps * batch, 3 * hidden)
        dx = product(rows_in, w_ih_t.t(), None).view(steps, batch, -1)
        d_w_ih_t = product(x.reshape(steps * batch, -1).t(), rows_in, None)
        d_w_hh_t = product(s_prev.view(steps * batch, hidden).t(), rows_hidden, None)
        return (dx, dh0, None, d_w_ih_t, d_w_hh_t, rows_in.sum(0),
                rows_hidden[:, 2 * hidden:].sum(0), None)


def gru_chunk(x: Tensor, layout: GRULayout, h0: Tensor,
              resets: Tensor) -> tuple[Tensor, Tensor] | None:
    """The GRU over the chunk ``x`` from ``h0``; ``None`` where the compiled loops do not run
    (off the CPU, disabled, a failed build, or a dtype they do not cover).

    Shapes:
        - x: ``(T, B, input_size)``, T ≥ 1; resets ``(T, B)`` bool
        - layout: :class:`GRULayout` of the weights
        - h0: ``(B, H)``
        - returns the outputs ``(T, B, H)`` and the final ``h`` ``(B, H)``
    """
    ops = compiled.ops(x)
    if ops is None or x.dtype not in (torch.float32, torch.float64) or x.shape[0] == 0:
        return None
    y, h = _GRUChunk.apply(x, h0, resets.contiguous(), *layout, ops)
    return y, h

r"""An LSTM over a whole chunk in one call of the compiled loops, the episode resets inside it.

torch's fused LSTM kernel cannot reset a batch item in the middle of a sequence, so
:func:`rlmem.cells._engines.fused_rnn.lstm` calls it once per reset-free segment, cutting the
chunk wherever any item resets. A PPO minibatch of 16 chunks of 16 steps, late in a DoorKey-5x5
run (episodes of about 20 steps), is cut into about nine segments, and each call costs the
kernel's set-up again. Here the chunk is one call (``csrc/lstm_chunk.h``): the input terms of
every step as one matrix product, then the step loop in C++ (one small matrix product and the
gates' elementwise math per step, the resets applied before the step), and a backward by hand.
Its products are the compiled loops' ``product``: on a CPU with AVX-512, in float32, the
blocked loop of ``csrc/blocked_product.h`` (where torch's MKL took 11 µs a step forward and 21
backward at 16 × 64 → 256, about five times as long); else ATen's. There a small chunk is
faster here than in torch's kernel even where no reset cuts it (:func:`takes_whole_chunk`).

The step is the attentive cells' base LSTM in the doubled form
(:meth:`rlmem.cells.lstm_base.LSTMBase.step_doubled`):

.. math::
    z'_t = D (W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh}), \qquad
    g_t = 2\sigma(z'_g) - 1 = \tanh(z_g), \qquad \tanh c_t = 2\sigma(2 c_t) - 1

with :math:`D` doubling the g gate's rows (exact in floating point). The same function as
``torch.lstm_cell``'s step, rounded otherwise: ``tests/cells/test_engines.py`` holds it equal to
:func:`rlmem.cells.time_loop.scan` over :meth:`rlmem.cells.lstm.LSTM.step` in float64, outputs,
states and every gradient, under resets.

CPU only, and only where the compiled loops are available (:func:`compiled.ops`); the caller
falls back to :func:`~rlmem.cells._engines.fused_rnn.scan_segments` otherwise.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

from rlmem.cells._engines import compiled
from rlmem.cells._engines.base_recurrence import previous_states


def doubled_g(hidden: int, like: Tensor) -> Tensor:
    """The diagonal of :math:`D`: 1 for the i, f and o rows, 2 for g's. Shapes: ``(4H, 1)``."""
    factor = torch.ones(4, hidden, 1, dtype=like.dtype, device=like.device)
    factor[2] = 2.0
    return factor.view(4 * hidden, 1)


class _LSTMChunk(torch.autograd.Function):
    """The chunk's forward (``lstm_chunk_forward``) and backward as one autograd node."""

    @staticmethod
    def forward(ctx: FunctionCtx, x: Tensor, h0: Tensor, c0: Tensor, resets: Tensor,
                w_ih: Tensor, w_hh: Tensor, b_ih: Tensor, b_hh: Tensor,
                ops: Any) -> tuple[Tensor, Tensor, Tensor]:
        steps, batch, _ = x.shape
        hidden = h0.shape[1]
        double = doubled_g(hidden, x)
        w_hh_doubled = w_hh * double
        bias = (b_ih + b_hh).unsqueeze(1).mul_(double).squeeze(1)
        xp = ops.product(x.reshape(steps * batch, -1), (w_ih * double).t(), bias)
        act = x.new_empty(steps, batch, 4, hidden)
        partner = x.new_empty(steps + 1, batch, 4, hidden)
        partner[0, :, 1] = c0
        y = x.new_empty(steps, batch, hidden)
        ops.lstm_chunk_forward(xp.view(steps, batch, 4 * hidden), h0.contiguous(),
                               resets.contiguous(), w_hh_doubled.t(), act, partner, y)
        ctx.save_for_backward(x, h0, resets, w_ih, w_hh_doubled, act, partner, y)
        ctx.ops = ops  # type: ignore[attr-defined]
        ctx.set_materialize_grads(False)
        return y, y[-1].clone(), partner[steps, :, 1].clone()

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, g_y: Tensor | None, g_h: Tensor | None,
                 g_c: Tensor | None) -> tuple[Tensor | None, ...]:
        saved = ctx.saved_tensors  # type: ignore[attr-defined]
        x, h0, resets, w_ih, w_hh_doubled, act, partner, y = saved
        steps, batch, hidden = y.shape
        empty = y.new_empty(0)
        dz = y.new_empty(steps, batch, 4 * hidden)
        dh0, dc0 = ctx.ops.lstm_chunk_backward(  # type: ignore[attr-defined]
            empty if g_y is None else g_y.contiguous(), empty if g_h is None else g_h,
            empty if g_c is None else g_c, resets, w_hh_doubled, act, partner, y, dz,
            y.new_empty(2, batch, hidden))
        # dz is the doubled pre-activations' gradient; the weights' is D dz (g's rows twice).
        dz.view(steps, batch, 4, hidden)[:, :, 2].mul_(2.0)
        rows = dz.view(steps * batch, 4 * hidden)
        product = ctx.ops.product  # type: ignore[attr-defined]
        dx = product(rows, w_ih, None).view(steps, batch, -1)
        d_w_ih = product(rows.t(), x.reshape(steps * batch, -1), None)
        h_previous = previous_states(torch.empty_like(y), h0, y, resets)
        d_w_hh = product(rows.t(), h_previous.view(steps * batch, hidden), None)
        d_bias = rows.sum(0)
        return dx, dh0, dc0, None, d_w_ih, d_w_hh, d_bias, d_bias.clone(), None


def lstm_chunk(x: Tensor, weights: tuple[Tensor, Tensor, Tensor, Tensor], h0: Tensor,
               c0: Tensor, resets: Tensor) -> tuple[Tensor, Tensor, Tensor] | None:
    """The LSTM over the chunk ``x`` from ``(h0, c0)``; ``None`` where the compiled loops do
    not run (off the CPU, disabled, a failed build, or a dtype they do not cover).

    Shapes:
        - x: ``(T, B, input_size)``, T ≥ 1; resets ``(T, B)`` bool
        - weights: ``W_ih (4H, input_size), W_hh (4H, H), b_ih (4H,), b_hh (4H,)``, as
          ``nn.LSTM``'s ``all_weights[0]``
        - h0, c0: ``(B, H)``
        - returns the outputs ``(T, B, H)`` and the final ``h`` and ``c``, each ``(B, H)``
    """
    ops = compiled.ops(x)
    if ops is None or x.dtype not in (torch.float32, torch.float64) or x.shape[0] == 0:
        return None
    w_ih, w_hh, b_ih, b_hh = weights
    y, h, c = _LSTMChunk.apply(x, h0, c0, resets, w_ih, w_hh, b_ih, b_hh, ops)
    return y, h, c


SMALL_CHUNK = 16 * 16 * 64
"""The most steps × items × hidden units of a chunk that no reset cuts for which
:func:`takes_whole_chunk` takes this chunk over torch's kernel. Below it torch's kernel pays its
set-up per call more than this chunk pays its step loop; above it the two do the same products
near the core's peak and torch's (oneDNN's) elementwise steps are the faster. On this project's
AMD EPYC (family 26, AVX-512), forward and backward, in two runs, the compiled chunk took
0.93-0.94 of torch's time at 16 × 16 × 64 (the fast and minigrid presets' minibatch chunks),
0.96 at 4 × 64 × 64, the same at 16 × 16 × 128, 1.00-1.06 at 16 × 64 × 64 and 64 × 16 × 64, and
1.15-1.22 at the generic preset's 64 × 4 × 256 (``benchmarks/lstm_chunk_kernel.py``,
``benchmarks/results/lstm_chunk_kernel.md``)."""


def takes_whole_chunk(x: Tensor, hidden: int) -> bool:
    """Whether a chunk like ``x`` that no reset cuts runs here rather than in torch's kernel:
    float32 with the blocked products (a CPU with AVX-512: ``csrc/blocked_product.h``), under
    autograd (acting without it, torch's kernel keeps nothing for a backward and is the faster),
    and at most :data:`SMALL_CHUNK` steps × items × hidden units."""
    return (torch.is_grad_enabled() and x.shape[0] * x.shape[1] * hidden <= SMALL_CHUNK
            and compiled.blocked_ops(x) is not None)

r"""The delta rule over a chunk in blocks: DeltaNet's chunkwise form, with resets.

The recurrence, per head (the cell's ``step``):

.. math::
    S_t = S_{t-1} + \beta_t (v_t - S_{t-1} k_t) k_t^\top, \qquad o_t = S_t q_t

Within a block of C steps that starts from :math:`S_0`, every update is
:math:`\delta_j k_j^\top` with :math:`\delta_j = \beta_j (v_j - S_{j-1} k_j)`, and
:math:`S_{j-1} k_j = S_0 k_j + \sum_{m<j} \delta_m (k_m^\top k_j)`; so the δ of a block solve
one unit lower-triangular system (the WY / UT form of Yang et al., 2024):

.. math::
    (I + \mathrm{diag}(\beta)\, \mathrm{tril}_{-1}(K K^\top))\, \Delta
        = \mathrm{diag}(\beta) (V - K S_0^\top), \qquad
    O = Q S_0^\top + \mathrm{tril}(Q K^\top) \Delta, \qquad
    S_C = S_0 + \Delta^\top K

(rows are steps). The system's inverse applied to :math:`\beta V` and :math:`\beta K` (U and
W) needs no :math:`S_0`, so all blocks solve at once; then one pass over the blocks carries
the state: :math:`\Delta = U - W S_0^\top`, the outputs, the next :math:`S_0`. A reset before
step ``i`` cuts the block: the pairs ``(i, j)`` across it drop out of both triangular
matrices, and :math:`S_0` reaches only the steps before the block's first reset. Costs per
block and head :math:`O(C^2 d + C d^2)`, against the step's :math:`O(C d^2)` in C sequential
steps.

Tensor functions on any device; autograd gives the gradients.

On the CPU, in float32 and float64, DeltaNet's chunk runs instead as the recurrence itself, step
by step, compiled with the cell's short convolution and feature map (:func:`compiled_scan`,
``csrc/delta_rule.h``,
built by :mod:`.compiled`), its backward written out: a head's :math:`d \times d` fast weights
stay in the core's cache for the whole chunk, where the blocks move :math:`O(C^2)` matrices
through a dozen ATen calls each (DeltaNet's training step at batch 64, T = 128 took 1.79x our
lstm's that way). For float32 heads of 16, 32 or 64 on a CPU with AVX-512 the fast weights'
step, its backward and the SiLU are ``csrc/delta_rule_wide.h``'s, on S held transposed (with
the backward's other changes, the kernels took 0.55x and 0.50x their time at T = 128, B = 64:
``benchmarks/results/delta_rule_kernel.md``). Both are proved equal to the cell's ``step`` in
float64
(``tests/cells/test_modern_cells.py``, ``tests/cells/test_engines.py``, each with the
compiled loops and without).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from rlmem.cells._engines import compiled
from rlmem.cells.resets import reset_where

CPU_BLOCK = 16
"""Steps per block on the CPU."""

DEVICE_BLOCK = 64
"""Steps per block on an accelerator."""

COMPILED_DTYPES = (torch.float32, torch.float64)
"""The dtypes of the compiled loop (``csrc/delta_rule.h``, :func:`compiled_scan`); others
run the blocks."""


def _blocks(value: Tensor, count: int, size: int) -> Tensor:
    """``(T, B, h, f)`` as ``(count, B, h, size, f)``, zero-padded at the end (no-op steps)."""
    pad = count * size - value.shape[0]
    if pad:
        value = torch.cat([value, value.new_zeros(pad, *value.shape[1:])])
    return value.view(count, size, *value.shape[1:]).movedim(1, -2)


def delta_rule_scan(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, state: Tensor,
                    resets: Tensor) -> tuple[Tensor, Tensor]:
    r"""Every :math:`o_t = S_t q_t` of the delta rule and the final :math:`S`, from
    :math:`S_{-1}` = ``state``, with ``resets[t]`` zeroing :math:`S_{t-1}` first.

    Shapes:
        - q, k, v: ``(T, B, h, d)``; beta: ``(T, B, h, 1)``; state: ``(B, h, d, d)``
          (``(d_v, d_k)`` per head); resets: ``(T, B)`` bool
        - returns o ``(T, B, h, d)`` and the final state ``(B, h, d, d)``
    """
    steps = q.shape[0]
    if steps == 1:  # a rollout's step: the update itself costs less than a block's solve
        state = reset_where(state, resets[0].view(-1, 1, 1, 1))
        error = v[0] - (state @ k[0].unsqueeze(-1)).squeeze(-1)
        state = state + (beta[0] * error).unsqueeze(-1) * k[0].unsqueeze(-2)
        return (state @ q[0].unsqueeze(-1)).squeeze(-1).unsqueeze(0), state
    size = min(CPU_BLOCK if q.device.type == "cpu" else DEVICE_BLOCK, steps)
    count = -(-steps // size)
    Q, K, V, b = (_blocks(value, count, size) for value in (q, k, v, beta))
    padded = torch.cat([resets, resets.new_zeros(count * size - steps, resets.shape[1])])
    index = torch.arange(size, device=q.device)
    # start[i]: the block's last step ≤ i that resets (-1: none); (count, B, 1, size, 1)
    start = torch.where(padded.view(count, size, -1), index.view(1, size, 1), -1)
    start = start.cummax(dim=1).values.transpose(1, 2)[:, :, None, :, None]
    same = (index >= start) & (index <= index.unsqueeze(1))  # j in i's episode, j ≤ i
    keep = (start < 0).to(q.dtype)  # S_0 reaches step i
    strict = same & (index < index.unsqueeze(1))
    system = torch.eye(size, dtype=q.dtype, device=q.device) + b * (K @ K.mT) * strict
    solved = torch.linalg.solve_triangular(
        system, torch.cat([b * V, b * keep * K], -1), upper=False, unitriangular=True)
    U, W = solved.split([V.shape[-1], K.shape[-1]], -1)
    reads = (Q @ K.mT) * same
    # Each block's slices by unbind, not by indexing: one backward node per tensor in place of
    # one per block, each of which would fill a whole tensor's gradient with zeros.
    lasts = same[..., -1, :].unsqueeze(-1).to(q.dtype).unbind(0)
    outputs = []
    for U_i, W_i, keep_i, Q_i, reads_i, last, K_i in zip(
            U.unbind(0), W.unbind(0), keep.unbind(0), Q.unbind(0), reads.unbind(0), lasts,
            K.unbind(0), strict=True):
        delta = U_i - W_i @ state.mT
        outputs.append(keep_i * (Q_i @ state.mT) + reads_i @ delta)
        state = keep_i[..., -1:, :] * state + (delta * last).mT @ K_i
    o = torch.stack(outputs).movedim(-2, 1).reshape(count * size, *q.shape[1:])
    return (o[:steps] if count * size > steps else o), state


def compiled_scan(features: Tensor, window: Tensor, weight: Tensor, state: Tensor,
                  resets: Tensor, heads: int) -> tuple[Tensor, Tensor, Tensor] | None:
    """DeltaNet's chunk from its projected features, short convolution and feature map
    included, through the compiled loop (``csrc/delta_rule.h``); ``None`` where that cannot
    run (off the CPU, disabled, a failed build, a dtype other than float32 and float64): then
    the cell convolves in Python and :func:`delta_rule_scan` runs the chunk.

    Shapes:
        - features: ``(T, B, 3 h d + h)``, :meth:`~rlmem.cells.deltanet.DeltaNet.project_input`'s;
          window: ``(B, K, 3 h d)``, the projections of the last K steps, oldest first; weight:
          ``(3 h d, K)``, the filters (:class:`torch.nn.Conv1d`'s order); state:
          ``(B, h, d, d)``; resets: ``(T, B)`` bool
        - returns o ``(T, B, h, d)``, the final state ``(B, h, d, d)`` and the window after
          the chunk ``(B, K, 3 h d)``
    """
    native = compiled.ops(features)
    if native is None or features.dtype not in COMPILED_DTYPES:
        return None
    taps = weight.flip(1).t()  # tap j reaches j steps back
    o, final, after = _CompiledDeltaNet.apply(features, window, taps, state, resets, heads,
                                              native)
    return o, final, after


class _CompiledDeltaNet(torch.autograd.Function):
    """The chunk step by step in C++ (``delta_forward``), and its backward
    (``delta_backward``: each head's forward replayed to hold its states, then the gradients
    back in time; the equations are in ``csrc/delta_rule.h``)."""

    @staticmethod
    def forward(ctx: Any, features: Tensor, window: Tensor, taps: Tensor, state: Tensor,
                resets: Tensor, heads: int, native: Any) -> tuple[Tensor, Tensor, Tensor]:
        taps = taps.contiguous()
        ctx.native, ctx.heads = native, heads
        ctx.save_for_backward(features, window, taps, state, resets)
        o, final, after = native.delta_forward(features, window, taps, state, resets, heads)
        return o, final, after

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad_o: Tensor, grad_final: Tensor,
                 grad_after: Tensor) -> tuple[Tensor | None, ...]:
        features, window, taps, state, resets = ctx.saved_tensors
        grad_features, grad_window, grad_taps, grad_state = ctx.native.delta_backward(
            grad_o, grad_final, grad_after, features, window, taps, state, resets, ctx.heads)
        return grad_features, grad_window, grad_taps, grad_state, None, None, None

r"""SA-RNN's engine: its time loop over a chunk, with a hand-written backward pass."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rlmem.cells._engines import compiled, gpu
from rlmem.cells._engines.onednn_linear import in_onednn
from rlmem.cells.resets import cut_gradient, reset_masks, reset_where
from rlmem.cells.time_loop import S, ScanResult


class SARNNWeights(NamedTuple):
    """What SA-RNN's loop reads besides the state and the input terms."""

    weight_hh: Tensor
    """The GRU's recurrent weight, ``(3H, H)``."""
    bias_hh: Tensor
    """The GRU's recurrent bias, ``(3H,)``."""
    w_u: Tensor
    """The coordinator's recurrent weight (diagonal), ``(H,)``."""


def fast_scan(inputs: Tensor, weights: SARNNWeights, state: S, resets: Tensor,
              slope: Tensor) -> ScanResult:
    """SA-RNN (:class:`~rlmem.cells.sarnn.SARNN`) over a chunk through :class:`SARNNScan`.

    Shapes:
        - inputs: ``(T, B, 4H)`` (the cell's ``project_input``); resets ``(T, B)``
        - state: a one-field NamedTuple, :math:`h` ``(B, H)``; returned of the same type
        - slope: the hard sigmoid's annealed slope α, a scalar
    """
    y, probability, update = SARNNScan.apply(inputs, state[0], resets, *weights, slope)
    return ScanResult(y, state._make([y[-1]]),
                      {"update": update, "update_probability": probability})


class SARNNScan(torch.autograd.Function):
    r"""SA-RNN's time loop over one chunk, with a hand-written backward pass.

    The forward pass is :meth:`~rlmem.cells.sarnn.SARNN.step` for every ``t``, outside
    autograd, rearranged: :math:`\tanh(a) = 2\sigma(2a) - 1` for the GRU's candidate n (the
    factor 2 folded into its input block and into the product with :math:`r`), the hard
    sigmoid as
    :math:`\mathrm{clamp}(\tfrac{\alpha}{2}(w_u \odot h + W_i x + b_u) + \tfrac12, 0, 1)` with
    :math:`\alpha/2` folded into :math:`w_u` and the input block, and the update as
    :math:`h_t = h - u_t \odot d_t` with :math:`d_t = (1 - z) \odot (h - n)`. The backward pass
    is the GRU's, plus the coordinator's: the straight-through gradient
    :math:`\bar{\tilde u} = \bar u = -\bar h_t \odot d_t` (plus the budget's), through the
    clamp (read from :math:`\tilde u`, so none passes where :math:`\tilde u` is exactly 0 or 1,
    where autograd's clamp would pass it: a set of measure zero), and the weight gradients
    summed over all steps in one matmul. Where :func:`gpu.runs` says so (CUDA), both loops run
    through the Triton kernels of :mod:`.gpu.sarnn` (two launches a step each way), which
    compute the rearrangement themselves from the cell's own input terms.

    Shapes:
        - inputs: ``(T, B, 4H)`` from :meth:`~rlmem.cells.sarnn.SARNN.project_input`;
          h0: ``(B, H)``
        - resets: ``(T, B)`` bool; weight_hh: ``(3H, H)``; bias_hh: ``(3H,)``; w_u: ``(H,)``;
          slope: scalar
        - returns y, the update probability :math:`\tilde u` and the update :math:`u` (not
          differentiable: a trace), each ``(T, B, H)``
    """

    @staticmethod
    def forward(ctx: Any, inputs: Tensor, h0: Tensor, resets: Tensor, weight_hh: Tensor,
                bias_hh: Tensor, w_u: Tensor, slope: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        half_slope = 0.5 * slope
        ctx.kernels = gpu.kernels(h0, "sarnn")  # the module, or None: the Python loops
        if ctx.kernels is not None:
            y, ctx.saved = ctx.kernels.forward(inputs, h0, resets, weight_hh, bias_hh, w_u,
                                           half_slope)
            probability, update = ctx.saved.probability, ctx.saved.update
        else:
            y, probability, update = _forward_loop(ctx, _rearranged(inputs, half_slope), h0,
                                                   resets, weight_hh, bias_hh, w_u * half_slope)
        ctx.mark_non_differentiable(update)
        ctx.save_for_backward(weight_hh, w_u, half_slope)
        return y, probability, update

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_y: Tensor, grad_probability: Tensor,
                 _grad_update: Tensor) -> tuple[Tensor | None, ...]:
        weight_hh, w_u, half_slope = ctx.saved_tensors
        size = grad_y.shape[2]
        if ctx.kernels is not None:
            grad_all, grad_next = ctx.kernels.backward(ctx.saved, grad_y, grad_probability,
                                                       weight_hh)
            state_rows = ctx.saved.states[:-1].reshape(-1, size)
        else:
            grad_all, grad_next = _backward_loop(ctx, grad_y, grad_probability, weight_hh,
                                                 w_u * half_slope)
            state_rows = torch.stack(ctx.saved[2]).view(-1, size)
        grad_inputs = grad_all[..., :4 * size]
        grad_inputs[..., size:2 * size] *= half_slope  # ā = α/2 · clamp'(·) ⊙ ũ̄
        grad_hidden = grad_all[..., 2 * size:].reshape(-1, 3 * size)
        grad_w_u = (grad_inputs[..., size:2 * size].reshape(-1, size) * state_rows).sum(0)
        needs = ctx.needs_input_grad
        return (grad_inputs if needs[0] else None, grad_next if needs[1] else None, None,
                grad_hidden.T @ state_rows if needs[3] else None,
                grad_hidden.sum(0) if needs[4] else None, grad_w_u if needs[5] else None,
                None)


StepProduct = Callable[[Tensor, Tensor, Tensor], Tensor]
"""``(add, a, b) -> add + a b``: a step's product with the recurrent weight."""


def _step_product(inputs: Tensor) -> StepProduct:
    """The loops' product: inside :func:`~rlmem.cells._engines.onednn_linear.onednn_products`
    (where the products may leave ATen's, as the compiled loops' do), in float32 on a CPU with
    AVX-512, the blocked loop (``csrc/blocked_product.h``: a step's 16 × 128 by 128 × 384 took
    about 10 µs in ATen's MKL on an AMD CPU); ``torch.addmm`` otherwise."""
    native = compiled.blocked_ops(inputs) if in_onednn(inputs) else None
    if native is None:
        return torch.addmm
    return lambda add, a, b: native.product(a, b, add)


def _rearranged(inputs: Tensor, half_slope: Tensor) -> Tensor:
    """The input terms with the n block doubled and the u block ``α/2 · (·) + 1/2``."""
    size = inputs.shape[2] // 4
    # Blocks [n, u, r, z]: 2·(W_in x + b_in) for tanh through σ, α/2·(W_i x + b_u) + 1/2.
    scale = torch.ones_like(inputs[0, 0]).view(4, size)
    scale[0] = 2.0
    scale[1] = half_slope
    shift = torch.zeros_like(scale)
    shift[1] = 0.5
    return torch.addcmul(shift.view(-1), inputs, scale.view(-1))


def _forward_loop(ctx: Any, inputs: Tensor, h0: Tensor, resets: Tensor, weight_hh: Tensor,
                  bias_hh: Tensor, w_u_scaled: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """:class:`SARNNScan`'s forward loop in torch ops (where the kernels do not run); keeps
    what :func:`_backward_loop` reads in ``ctx``."""
    size = h0.shape[1]
    input_n, input_u, input_rz = (block.unbind(0) for block in
                                  inputs.split([size, size, 2 * size], 2))
    minus_one = torch.full((), -1.0, dtype=h0.dtype, device=h0.device)
    ctx.product = product = _step_product(inputs)
    weight_hh_t = weight_hh.t() if product is torch.addmm else weight_hh.t().contiguous()
    masks = reset_masks(resets)
    outputs, probabilities, updates, states, resets_r, keeps_z, hidden_n, candidates = (
        [], [], [], [], [], [], [], [])
    gaps, kept = [], []
    h = h0
    for t in range(inputs.shape[0]):
        mask = masks[t]
        if mask is not None:
            h = reset_where(h, mask)
        hidden = product(bias_hh, h, weight_hh_t)
        rz = torch.add(input_rz[t], hidden[:, :2 * size]).sigmoid_()
        r, z = rz.chunk(2, 1)
        hidden_n_t = hidden[:, 2 * size:]
        n = torch.add(minus_one, torch.addcmul(input_n[t], r, hidden_n_t, value=2.0)
                      .sigmoid_(), alpha=2.0)
        gap = torch.sub(h, n)
        kept_gap = torch.addcmul(gap, z, gap, value=-1.0)  # d = (1 - z) ⊙ (h - n)
        probability = torch.addcmul(input_u[t], w_u_scaled, h).clamp_(0.0, 1.0)
        update = torch.gt(probability, 0.5, out=torch.empty_like(probability))
        h_new = torch.addcmul(h, update, kept_gap, value=-1.0)
        outputs.append(h_new)
        probabilities.append(probability)
        updates.append(update)
        states.append(h)
        resets_r.append(r)
        keeps_z.append(z)
        hidden_n.append(hidden_n_t)
        candidates.append(n)
        gaps.append(gap)
        kept.append(kept_gap)
        h = h_new
    ctx.masks = masks
    ctx.saved = (probabilities, updates, states, resets_r, keeps_z, hidden_n, candidates,
                 gaps, kept)
    return torch.stack(outputs), torch.stack(probabilities), torch.stack(updates)


def _backward_loop(ctx: Any, grad_y: Tensor, grad_probability: Tensor, weight_hh: Tensor,
                   w_u_scaled: Tensor) -> tuple[Tensor, Tensor]:
    """:class:`SARNNScan`'s backward loop in torch ops: the gradients of the pre-activations,
    in blocks ``[n, u, r, z | hidden n]`` (the u block before its factor α/2), and of h0."""
    masks = ctx.masks
    (probabilities, updates, _states, resets_r, keeps_z, hidden_n, candidates, gaps,
     kept) = ctx.saved
    time_steps, batch, size = grad_y.shape
    # Blocks [n, u, r, z | hidden n]: the first four are the input gradient, the last three
    # the gradient of W_hh h + b_hh.
    grad_all = grad_y.new_empty(time_steps, batch, 5 * size)
    grad_next = grad_y.new_zeros(batch, size)
    for t, grad_y_t, grad_probability_t, grad_t in zip(
            range(time_steps - 1, -1, -1), reversed(grad_y.unbind(0)),
            reversed(grad_probability.unbind(0)), reversed(grad_all.unbind(0)),
            strict=True):
        r, z, n = resets_r[t], keeps_z[t], candidates[t]
        grad = torch.add(grad_y_t, grad_next)
        # u = ũ + const: ū = -h̄ ⊙ d goes straight to ũ, then through the clamp.
        grad_pre_u = torch.ops.aten.hardtanh_backward.default(
            torch.addcmul(grad_probability_t, grad, kept[t], value=-1.0),
            probabilities[t], 0.0, 1.0)
        grad_gru = updates[t] * grad
        grad_h = torch.sub(grad, grad_gru).addcmul_(grad_gru, z).addcmul_(grad_pre_u,
                                                                           w_u_scaled)
        grad_pre_n = torch.ops.aten.tanh_backward.default(
            torch.addcmul(grad_gru, grad_gru, z, value=-1.0), n)
        grad_pre_r = torch.ops.aten.sigmoid_backward.default(grad_pre_n * hidden_n[t], r)
        grad_pre_z = torch.ops.aten.sigmoid_backward.default(grad_gru * gaps[t], z)
        torch.cat([grad_pre_n, grad_pre_u, grad_pre_r, grad_pre_z, grad_pre_n * r], 1,
                  out=grad_t)
        grad_next = ctx.product(grad_h, grad_t[:, 2 * size:], weight_hh)
        mask = masks[t]
        if mask is not None:
            cut_gradient(grad_next, mask, in_place=True)
    return grad_all, grad_next

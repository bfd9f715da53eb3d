r"""TARNN's engine: its time loop over a chunk, with a hand-written backward pass.

The loop runs compiled (``csrc/tarnn.h``) where :mod:`.compiled` can, else as Triton kernels
(:mod:`.gpu.tarnn`, the same loops) where :func:`.gpu.runs`, else in Python.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rlmem.cells._engines import compiled, gpu
from rlmem.cells._engines.fast_forms import FastForm
from rlmem.cells._engines.onednn_linear import in_onednn
from rlmem.cells._engines.workspace import WORKSPACE
from rlmem.cells.resets import cut_gradient, reset_masks, reset_where
from rlmem.cells.time_loop import S, ScanResult


class TARNNWeights(NamedTuple):
    """What TARNN's loop reads besides the state and the input terms."""

    weight_s: Tensor
    """The state's weights, stacked as the cell's ``state_weight``, ``(3D, D)``."""
    weight_u: Tensor
    """U, ``(D, D)``."""
    eta: Tensor
    r"""The Euler step sizes :math:`\eta_k`, ``(K,)``."""


def fast_scan(inputs: Tensor, weights: TARNNWeights, state: S, resets: Tensor, *,
              coupled: bool, form: FastForm) -> ScanResult:
    """TARNN (:class:`~rlmem.cells.tarnn.TARNN`) over a chunk through :class:`TARNNScan`.

    Shapes:
        - inputs: ``(T, B, 3D)`` (the cell's ``project_input``); resets ``(T, B)``
        - state: a one-field NamedTuple, :math:`s` ``(B, D)``; returned of the same type
        - coupled: A in its coupled form; form: φ's fast form
    """
    y, beta = TARNNScan.apply(inputs, state[0], resets, *weights, coupled, form)
    return ScanResult(y, state._make([y[-1]]), {"beta": beta})


class TARNNScan(torch.autograd.Function):
    r"""TARNN's time loop over one chunk, with a hand-written backward pass.

    The forward pass is :meth:`~rlmem.cells.tarnn.TARNN.step` for every ``t``, outside
    autograd and with φ in its :class:`~rlmem.cells._engines.fast_forms.FastForm`
    :math:`\phi(a) = m h(s a) + o` (``tanh`` runs as :math:`2\sigma(2a) - 1`): :math:`s` is
    folded into U and into the input and state blocks of :math:`W u`, and :math:`o` into
    :math:`B u`. An Euler step k (from 0, :math:`z_0 = s_{m-1}`) is a lerp towards
    :math:`e_k = z_k + F_k = (A + I) z_k + B u + \phi_k`:
    :math:`z_{k+1} = z_k + \eta_k \beta \odot (e_k - z_k)`. The forward pass keeps what it
    computes anyway, :math:`z_k`, :math:`h_k` and :math:`e_k`, and the backward pass
    walks the steps in reverse, with :math:`q_k = \eta_k \beta \odot \bar z_{k+1}` and
    :math:`\bar a_k = \phi'_k \odot q_k`:

    .. math::
        \bar z_k = \bar z_{k+1} + A^T q_k + U^T \bar a_k, \qquad
        \bar\beta = \textstyle\sum_k \eta_k F_k \odot \bar z_{k+1}, \qquad
        \bar\eta_k = \textstyle\sum \beta \odot F_k \odot \bar z_{k+1}

    Only the chain through :math:`\bar z_k` is walked Euler step by Euler step; what sums over
    k (:math:`F_k \odot \bar z_{k+1}`, :math:`\bar\beta`, :math:`\bar\eta`, the gradients
    of :math:`B u` and :math:`W u`, U's gradient) is one op or one matmul per time step, and the
    gradient of the state weights one matmul per chunk. At batch 16 an op costs about as much
    as its launch, so the count of ops is what this is written to keep low. A reset replaces
    the incoming state by zeros, so no gradient crosses it.

    Shapes:
        - inputs: ``(T, B, 3D)`` from :meth:`~rlmem.cells.tarnn.TARNN.project_input`;
          s0: ``(B, D)``
        - resets: ``(T, B)`` bool; weight_s: ``(3D, D)``; weight_u: ``(D, D)``; eta: ``(K,)``
        - returns y ``(T, B, D)`` and β ``(T, B, D)`` (not differentiable: a trace)
    """

    @staticmethod
    def forward(ctx: Any, inputs: Tensor, s0: Tensor, resets: Tensor, weight_s: Tensor,
                weight_u: Tensor, eta: Tensor, coupled: bool,
                form: FastForm) -> tuple[Tensor, Tensor]:
        inputs, weight_s_scaled, weight_u_scaled = _fold_scale_in(inputs, weight_s, weight_u,
                                                                  form)
        ctx.coupled, ctx.form = coupled, form
        native, kernels = _loops(inputs, s0.shape[1])
        ctx.native = native
        if native is not None:
            batch, size = s0.shape
            time_steps = inputs.shape[0]
            y, beta_all = inputs.new_empty(2, time_steps, batch, size).unbind(0)
            # z_k, h_k and e_k of every step: recycled, fresh pages of this size cost more
            # than the loop's elementwise work
            numel = 3 * time_steps * len(eta) * batch * size
            block = WORKSPACE.take(numel, inputs.dtype, inputs.device)
            saved = block[:numel].view(3, time_steps, len(eta), batch, size)
            # the kernels skip saving z_k, h_k, e_k where no backward pass will read them
            unsaved = {"save": False} if kernels and not any(ctx.needs_input_grad) else {}
            ctx.onednn = not kernels and in_onednn(inputs)
            native.tarnn_forward(inputs, s0, resets, weight_s_scaled.t(), weight_u_scaled.t(),
                                 eta, coupled, int(form.kernel), form.scale_out, y, beta_all,
                                 *saved, ctx.onednn, **unsaved)
            ctx.resets, ctx.saved, ctx.block = resets, saved, block
            if not any(ctx.needs_input_grad):
                WORKSPACE.give(block)
        else:
            masks = reset_masks(resets)
            y, beta_all, ctx.betas, ctx.euler, ctx.inner, ctx.targets = _forward_loop(
                inputs, s0, masks, weight_s_scaled.t(), weight_u_scaled.t(), eta, coupled, form)
            ctx.masks = masks
        ctx.mark_non_differentiable(beta_all)
        ctx.save_for_backward(weight_s_scaled, weight_u_scaled, eta, beta_all)
        return y, beta_all

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_y: Tensor, _grad_beta: Tensor | None) -> tuple[Tensor | None,
                                                                                ...]:
        weight_s, weight_u, eta, beta_all = ctx.saved_tensors
        coupled, form = ctx.coupled, ctx.form
        size = grad_y.shape[2]
        # ā = gain · h' ⊙ q, gain = s·m. The forward's weights already carry s;
        # m goes into the weights that carry ā back, and the gain into the gradients of the
        # blocks that produce a (W_2, U and the W_1 x + b inputs), once at the end.
        weight_s = weight_s * _block_scale(weight_s, size, (1.0, 1.0, form.scale_out))[:, None]
        weight_u = weight_u * form.scale_out
        if ctx.native is None:
            grad_gates, grad_next, grad_weight_u, grad_eta_terms = _backward_loop(
                grad_y, ctx.masks, weight_s, weight_u, eta, beta_all, ctx.betas, ctx.euler,
                ctx.inner, ctx.targets, coupled, form)
            return _finish(ctx.needs_input_grad, form, grad_gates, grad_next, grad_weight_u,
                           grad_eta_terms, torch.stack(ctx.euler[::len(eta)]))
        if ctx.saved is None:
            raise RuntimeError("TARNN's chunk can be backpropagated once: its backward "
                               "recycles the forward's buffers (no retain_graph)")
        euler, inner, targets = ctx.saved
        ctx.saved = None
        grad_gates, grad_next, grad_weight_u, grad_eta_terms = ctx.native.tarnn_backward(
            grad_y.contiguous(), ctx.resets, weight_s, weight_u, eta, beta_all, euler,
            inner, targets, coupled, int(form.kernel), ctx.onednn)
        result = _finish(ctx.needs_input_grad, form, grad_gates, grad_next, grad_weight_u,
                         grad_eta_terms, euler[:, 0])
        WORKSPACE.give(ctx.block)
        return result


def _loops(inputs: Tensor, size: int) -> tuple[Any, bool]:
    """The compiled loops, else the Triton kernels (the same functions), else ``None`` (the
    Python loops); and whether they are the kernels."""
    native = compiled.ops(inputs)
    if native is not None:
        return native, False
    kernels = gpu.kernels(inputs, "tarnn", lambda kernels: kernels.uncovered(size))
    return kernels, kernels is not None


def _fold_scale_in(inputs: Tensor, weight_s: Tensor, weight_u: Tensor,
                   form: FastForm) -> tuple[Tensor, Tensor, Tensor]:
    """The inputs and weights with φ's inner scale s folded into U and into the input and
    state blocks of :math:`W u`, and its shift o into :math:`B u`."""
    if form.scale_in == 1.0 and not form.shift:
        return inputs, weight_s, weight_u
    size = weight_u.shape[0]
    weight_s = weight_s * _block_scale(weight_s, size, (1.0, 1.0, form.scale_in))[:, None]
    weight_u = weight_u * form.scale_in
    shift = torch.zeros_like(inputs[0, 0])
    shift[size:2 * size] = form.shift
    inputs = torch.addcmul(shift, inputs, _block_scale(inputs, size, (1.0, 1.0, form.scale_in)))
    return inputs, weight_s, weight_u


def _forward_loop(inputs: Tensor, s0: Tensor, masks: list[Tensor | None], weight_s_t: Tensor,
                  weight_u_t: Tensor, eta: Tensor, coupled: bool, form: FastForm
                  ) -> tuple[Tensor, Tensor, list[Tensor], list[Tensor], list[Tensor],
                             list[Tensor]]:
    """The forward loop in Python (the compiled ``tarnn_forward`` is the same loop): y, β,
    and per step β and per Euler step :math:`z_k`, :math:`h_k` and :math:`e_k`."""
    batch, size = s0.shape
    half, steps = size // 2, len(eta)
    eta_column = eta.view(-1, 1, 1)
    # At batch 16 a view costs as much as a small op: what a step keeps are fresh tensors,
    # and the buffers reused at every step have their views made once.
    eta_beta = inputs.new_empty(steps, batch, size)
    eta_beta_k = eta_beta.unbind(0)
    outputs, betas, euler, inner, targets = [], [], [], [], []
    s = s0
    for inputs_t, mask in zip(inputs.unbind(0), masks, strict=True):
        if mask is not None:
            s = reset_where(s, mask)
        beta_pre, drive_b, drive_w = torch.addmm(inputs_t, s, weight_s_t).split(size, 1)
        beta = torch.sigmoid(beta_pre)
        torch.mul(eta_column, beta, out=eta_beta)
        z = s
        for k in range(steps):
            h = form.inner(torch.addmm(drive_w, z, weight_u_t))
            target = torch.add(drive_b, h, alpha=form.scale_out)  # F_k + z_k
            if coupled:
                target[:, :half] += z[:, half:]
            euler.append(z)
            inner.append(h)
            targets.append(target)
            z = torch.lerp(z, target, eta_beta_k[k])  # z_k + η_k β ⊙ F_k
        outputs.append(z)
        betas.append(beta)
        s = z
    return torch.stack(outputs), torch.stack(betas), betas, euler, inner, targets


def _backward_loop(grad_y: Tensor, masks: list[Tensor | None], weight_s: Tensor,
                   weight_u: Tensor, eta: Tensor, beta_all: Tensor, betas: list[Tensor],
                   euler: list[Tensor], inner: list[Tensor], targets: list[Tensor],
                   coupled: bool, form: FastForm) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The backward loop in Python (the compiled ``tarnn_backward`` is the same loop): the
    gates' gradient, the incoming state's, U's and the terms of η's."""
    time_steps, batch, size = grad_y.shape
    half, steps = size // 2, len(eta)
    eta_column = eta.view(-1, 1, 1)

    def buffer() -> tuple[Tensor, tuple[Tensor, ...]]:  # reused at every step
        tensor = grad_y.new_empty(steps, batch, size)
        return tensor, tensor.unbind(0)

    grad_z, grad_z_k = buffer()  # z̄_{k+1}
    q, q_k = buffer()  # η_k β ⊙ z̄_{k+1}
    grad_pre, grad_pre_k = buffer()  # raw ā_k = h'_k ⊙ q_k
    step_inner = grad_y.new_empty(steps, batch, size)
    slope_inner, slope_inner_k = buffer()  # h'_k
    grad_pre_rows = grad_pre.view(-1, size).T
    eta_beta, eta_beta_k = buffer()
    grad_slope = grad_y.new_empty(steps, batch, size)  # F_k ⊙ z̄_{k+1}
    grad_slope_rows = grad_slope.view(steps, -1)
    grad_beta = grad_y.new_empty(batch, size)  # β̄ = Σ_k η_k F_k ⊙ z̄_{k+1}
    grad_beta_flat = grad_beta.view(-1)
    grad_gates = grad_y.new_empty(time_steps, batch, 3 * size)
    grad_weight_u = weight_u.new_zeros(weight_u.shape)
    grad_next = grad_y.new_zeros(batch, size)
    beta_slopes = torch.addcmul(beta_all, beta_all, beta_all, value=-1.0).unbind(0)  # σ'
    grad_eta_terms = torch.zeros_like(grad_slope)  # Σ_t β ⊙ F_k ⊙ z̄_{k+1}
    for t, grad_y_t, grad_gates_t in zip(range(time_steps - 1, -1, -1),
                                         reversed(grad_y.unbind(0)),
                                         reversed(grad_gates.unbind(0)), strict=True):
        beta = betas[t]
        first = t * steps
        torch.mul(eta_column, beta, out=eta_beta)
        torch.add(grad_y_t, grad_next, out=grad_z_k[steps - 1])
        torch.stack(inner[first:first + steps], out=step_inner)
        form.inner_derivative(step_inner, slope_inner)
        for k in range(steps - 1, -1, -1):
            torch.mul(eta_beta_k[k], grad_z_k[k], out=q_k[k])
            torch.mul(q_k[k], slope_inner_k[k], out=grad_pre_k[k])
            carried = grad_z_k[k] - q_k[k]  # Aᵀ q_k, the -I part
            if coupled:
                carried[:, half:] += q_k[k][:, :half]
            torch.addmm(carried, grad_pre_k[k], weight_u, out=grad_z_k[k - 1] if k else grad_next)
        step_euler = torch.stack(euler[first:first + steps])
        step_slope = torch.stack(targets[first:first + steps]).sub_(step_euler)  # F_k
        torch.mul(step_slope, grad_z, out=grad_slope)
        torch.mv(grad_slope_rows.T, eta, out=grad_beta_flat)
        grad_eta_terms.addcmul_(grad_slope, beta)
        torch.cat([grad_beta * beta_slopes[t], q.sum(0), grad_pre.sum(0)], 1, out=grad_gates_t)
        grad_weight_u.addmm_(grad_pre_rows, step_euler.view(-1, size))
        grad_next.addmm_(grad_gates_t, weight_s)
        mask = masks[t]
        if mask is not None:
            cut_gradient(grad_next, mask, in_place=True)
    return grad_gates, grad_next, grad_weight_u, grad_eta_terms


def _finish(needs: tuple[bool, ...], form: FastForm, grad_gates: Tensor,
            grad_next: Tensor, grad_weight_u: Tensor, grad_eta_terms: Tensor,
            states: Tensor) -> tuple[Tensor | None, ...]:
    """:meth:`TARNNScan.backward`'s result from its loop's sums: the state weights' gradient
    in one matmul over the states :math:`s_{m-1}` ``(T, B, D)``, and the gain applied."""
    size = states.shape[-1]
    grad_eta = grad_eta_terms.sum((1, 2))
    grad_weight_s = grad_gates.view(-1, 3 * size).T @ states.reshape(-1, size)
    if form.gain != 1.0:
        grad_gates[..., 2 * size:] *= form.gain
        grad_weight_s[2 * size:] *= form.gain
        grad_weight_u *= form.gain
    return (grad_gates if needs[0] else None, grad_next if needs[1] else None, None,
            grad_weight_s if needs[3] else None, grad_weight_u if needs[4] else None,
            grad_eta if needs[5] else None, None, None)


def _block_scale(like: Tensor, size: int, factors: tuple[float, ...]) -> Tensor:
    """A vector of ``len(factors) · size`` entries, block i filled with ``factors[i]``.

    Filled on ``like``'s device, block by block: a tensor built from the Python floats would be
    copied from the host, which a CUDA graph cannot record."""
    scale = like.new_empty(len(factors), size)
    for block, factor in zip(scale, factors, strict=True):
        block.fill_(factor)
    return scale.view(-1)

"""TARNN: the time-adaptive RNN (Kag & Saligrama, 2021), Eq. 5–6, Algorithm 1 and A.4.

Reference: A. Kag, V. Saligrama. "Time Adaptive Recurrent Neural Network", CVPR 2021.
"""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable
from torch.nn import functional

from rlmem.cells import activations, extension, fastloop
from rlmem.cells.attention_scan import WORKSPACE
from rlmem.cells.base import Cell, Dims
from rlmem.cells.registry import register

A_FORMS = ("identity", "coupled")


class TARNNState(NamedTuple):
    s: Annotated[Tensor, Dims("hidden_size")]
    """Hidden state :math:`s_{m-1}`, ``(B, D)``."""


@register("tarnn")
class TARNN(Cell):
    r"""Time-adaptive RNN (Kag & Saligrama, 2021).

    With :math:`u_m = [x_m, s_{m-1}]` and learned time constants
    :math:`\beta = \sigma(U_s s_{m-1} + W_x x_m)`, the state solves the ODE (Eq. 5)

    .. math::
        \dot z = F(z) = \beta \odot (A z + B u_m + \phi(U z + W u_m)), \qquad z(0) = s_{m-1}

    by K Euler steps (Eq. 6) :math:`z^k = z^{k-1} + \eta_k F(z^{k-1})` for
    :math:`k = 1, \dots, K` from :math:`z^0 = s_{m-1}`, and :math:`s_m = z^K`.
    Where :math:`\beta_j \approx 0` the state is frozen and the input skipped; where
    :math:`\beta_j \approx 1` it moves to the equilibrium. ``A`` is fixed: ``identity`` is
    :math:`-I`, ``coupled`` is :math:`[A]_{ii} = -1, [A]_{i, i+D/2} = 1`.

    The step sizes :math:`\eta_k` are learned, one per Euler step and shared across time: the
    public code's one step size per timestep ties a model to its training length and breaks
    transfer to longer episodes. The optional regulariser of Theorem 1,
    :math:`\Omega = \gamma_1 \|A + B_2\|^2 + \gamma_2 \|U + W_2\|^2` (:math:`B_2, W_2` the
    blocks acting on :math:`s_{m-1}`), is returned as the aux loss ``omega``.

    Initialisation (A.4): weights from N(0, 0.1²), the bias of β at −3, other biases 0.

    K counts Euler *updates*. Eq. 6 as printed indexes the states instead:
    :math:`z^1 = s_{m-1}`, :math:`z^k = z^{k-1} + \eta F(z^{k-1})` for :math:`1 < k < K`,
    :math:`s_m = z^K`; read literally (with :math:`k \le K`, so that :math:`z^K` exists) that
    is K − 1 updates. We keep K updates: with the literal count, K = 1 would return
    :math:`s_{m-1}` and ignore the input, while the paper's appendix says one Euler step gives
    the vanilla RNN (A = −I, β = 1, η = 1); and K then means what it means for ``irnn`` and
    ``ernn`` (K = 1: one update). To run the paper's literal count, set K to its K − 1 (its
    A.4 uses K = 5: ``K=4`` here); the default K = 5 is one update more.

    How it is computed (the equations above, rearranged; the parameters keep their names). With
    :math:`B = [B_1, B_2]` and :math:`W = [W_1, W_2]` split into the blocks acting on
    :math:`x_m` and on :math:`s_{m-1}`, the input terms :math:`W_x x_m + b_\beta`,
    :math:`B_1 x_m` and :math:`W_1 x_m + b` are one matmul over the whole sequence
    (:meth:`project_input`), and the three products that read :math:`s_{m-1}`,
    :math:`U_s s_{m-1}`, :math:`B_2 s_{m-1}` and :math:`W_2 s_{m-1}`, one matmul per step.
    :math:`A z` is :math:`-z`, plus :math:`z_{i + D/2}` in row :math:`i < D/2` for the coupled
    form. The time loop runs in :class:`_TARNNScan`, with a hand-written backward pass.

    Args:
        input_size: features of each input :math:`x_m`.
        hidden_size: D, features of the state.
        K: number of Euler steps (A.4: 5).
        eta: initial Euler step size η (the paper tunes it per dataset, 0.0008–0.45).
        A: ``identity`` (:math:`-I`) or ``coupled`` (needs an even hidden size).
        nonlinearity: φ: ``tanh`` (the paper's choice for copy and PTB) or ``relu``.
        gamma1: γ1, weight of :math:`\|A + B_2\|^2` in Ω (0 disables).
        gamma2: γ2, weight of :math:`\|U + W_2\|^2` in Ω (0 disables).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`TARNNState`, ``(B, hidden_size)``
        - traces: ``beta`` ``(T, B, hidden_size)``
    """

    state_type = TARNNState

    A: Tensor
    """The dense :math:`A` (only Ω reads it; the recurrence uses its structure)."""

    def __init__(self, input_size: int, hidden_size: int, *, K: int = 5, eta: float = 0.1,
                 A: str = "identity", nonlinearity: str = "tanh", gamma1: float = 0.0,
                 gamma2: float = 0.0) -> None:
        super().__init__(input_size, hidden_size)
        if K < 1:
            raise ValueError(f"TARNN: K must be ≥ 1, got {K}")
        if A not in A_FORMS:
            raise ValueError(f"TARNN: unknown A={A!r}; valid: {', '.join(A_FORMS)}")
        if A == "coupled" and hidden_size % 2:
            raise ValueError(f"TARNN: A='coupled' needs an even hidden_size, got {hidden_size}")
        self.K, self.A_form, self.phi_name = K, A, nonlinearity
        self.gamma1, self.gamma2 = gamma1, gamma2
        self.phi = activations.nonlinearity(nonlinearity, "TARNN")
        self.fast_phi = activations.fast_form(nonlinearity, "TARNN")
        u_size = input_size + hidden_size
        self.B = nn.Linear(u_size, hidden_size, bias=False)
        self.W = nn.Linear(u_size, hidden_size)
        self.U = nn.Linear(hidden_size, hidden_size, bias=False)
        self.U_s = nn.Linear(hidden_size, hidden_size, bias=False)
        self.W_x = nn.Linear(input_size, hidden_size)  # its bias is the β bias, at -3
        self.eta = nn.Parameter(torch.full((K,), float(eta)))
        # Only Ω reads the dense A; the recurrence uses its structure (a_times).
        self.register_buffer("A", self._a_matrix(hidden_size, A), persistent=False)
        self.reset_parameters()

    @staticmethod
    def _a_matrix(size: int, form: str) -> Tensor:
        matrix = -torch.eye(size)
        if form == "coupled":
            half = size // 2
            matrix[torch.arange(half), torch.arange(half) + half] = 1.0
        return matrix

    def reset_parameters(self) -> None:
        for linear in (self.B, self.W, self.U, self.U_s, self.W_x):
            nn.init.normal_(linear.weight, std=0.1)
        nn.init.zeros_(self.W.bias)
        nn.init.constant_(self.W_x.bias, -3.0)

    # --- the recurrence, rearranged --------------------------------------------------------

    def project_input(self, x: Tensor) -> Tensor:
        r"""The input blocks of β, :math:`B u_m` and :math:`W u_m`, for every step at once.

        .. math::
            p_m = [W_x x_m + b_\beta,\; B_1 x_m,\; W_1 x_m + b]

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, 3 · hidden_size)``
        """
        columns = slice(0, self.input_size)
        weight = torch.cat([self.W_x.weight, self.B.weight[:, columns],
                            self.W.weight[:, columns]])
        bias = torch.cat([self.W_x.bias, torch.zeros_like(self.W.bias), self.W.bias])
        return functional.linear(x, weight, bias)

    def state_weight(self) -> Tensor:
        r""":math:`[U_s; B_2; W_2]`, the matrices of β, Bu and Wu that read :math:`s_{m-1}`.

        Shapes:
            - returns ``(3 · hidden_size, hidden_size)``
        """
        columns = slice(self.input_size, None)
        return torch.cat([self.U_s.weight, self.B.weight[:, columns], self.W.weight[:, columns]])

    def a_times(self, z: Tensor) -> Tensor:
        r""":math:`A z` from the structure of A: :math:`-z`, plus the shifted upper half."""
        if self.A_form == "identity":
            return -z
        half = self.hidden_size // 2
        return functional.pad(z[:, half:], (0, half)) - z

    def step(self, x_t: Tensor, state: TARNNState) -> tuple[Tensor, TARNNState,
                                                            dict[str, Tensor]]:
        """One step through autograd, from ``x_t = project_input(x)[t]``: the plain path that
        :class:`_TARNNScan` is tested against."""
        size = self.hidden_size
        s = state.s
        gates = torch.addmm(x_t, s, self.state_weight().T)
        beta = torch.sigmoid(gates[:, :size])
        drive_b, drive_w = gates[:, size:2 * size], gates[:, 2 * size:]
        z = s
        for k in range(self.K):
            z = z + self.eta[k] * beta * (self.a_times(z) + drive_b + self.phi(self.U(z)
                                                                                 + drive_w))
        return z, TARNNState(z), {"beta": beta}

    def _scan(self, x: Tensor, state: TARNNState,
              resets: Tensor) -> tuple[Tensor, TARNNState, dict[str, Tensor]]:
        y, beta = _TARNNScan.apply(self.project_input(x), state.s, resets,
                                   self.state_weight(), self.U.weight, self.eta,
                                   self.A_form == "coupled", self.fast_phi)
        return y, TARNNState(y[-1]), {"beta": beta}

    # --- what the cell adds and reports ----------------------------------------------------

    def aux_losses(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        if not (self.gamma1 or self.gamma2):
            return {}
        B2 = self.B.weight[:, self.input_size:]
        W2 = self.W.weight[:, self.input_size:]
        omega = (self.gamma1 * (self.A + B2).pow(2).sum()
                 + self.gamma2 * (self.U.weight + W2).pow(2).sum())
        return {"omega": omega}

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        return {"beta_mean": traces["beta"].mean(),
                **{f"eta_{k}": value for k, value in enumerate(self.eta.detach().unbind())}}

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, K={self.K}, A={self.A_form!r}, "
                f"nonlinearity={self.phi_name!r}, gamma1={self.gamma1}, gamma2={self.gamma2}")


class _TARNNScan(torch.autograd.Function):
    r"""TARNN's time loop over one chunk, with a hand-written backward pass.

    The forward pass is :meth:`TARNN.step` for every ``t``, outside autograd and with φ in its
    :class:`~rlmem.cells.activations.FastForm` :math:`\phi(a) = m h(s a) + o` (``tanh`` runs
    as :math:`2\sigma(2a) - 1`): :math:`s` is folded into U and into the input and state
    blocks of :math:`W u`, and :math:`o` into :math:`B u`. An Euler step k (from 0,
    :math:`z_0 = s_{m-1}`) is a lerp towards :math:`e_k = z_k + F_k = (A + I) z_k + B u +
    \phi_k`: :math:`z_{k+1} = z_k + \eta_k \beta \odot (e_k - z_k)`. The forward pass keeps
    what it computes anyway, :math:`z_k`, :math:`h_k` and :math:`e_k`, and the backward pass
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
        - inputs: ``(T, B, 3D)`` from :meth:`TARNN.project_input`; s0: ``(B, D)``
        - resets: ``(T, B)`` bool; weight_s: ``(3D, D)``; weight_u: ``(D, D)``; eta: ``(K,)``
        - returns y ``(T, B, D)`` and β ``(T, B, D)`` (not differentiable: a trace)
    """

    @staticmethod
    def forward(ctx: Any, inputs: Tensor, s0: Tensor, resets: Tensor, weight_s: Tensor,
                weight_u: Tensor, eta: Tensor, coupled: bool,
                form: activations.FastForm) -> tuple[Tensor, Tensor]:
        batch, size = s0.shape
        half, steps = size // 2, len(eta)
        if form.scale_in != 1.0 or form.shift:
            weight_s = weight_s * _block_scale(weight_s, size, (1.0, 1.0, form.scale_in))[:, None]
            weight_u = weight_u * form.scale_in
            shift = torch.zeros_like(inputs[0, 0])
            shift[size:2 * size] = form.shift
            inputs = torch.addcmul(shift, inputs, _block_scale(inputs, size, (1.0, 1.0,
                                                                              form.scale_in)))
        weight_s_t, weight_u_t = weight_s.t(), weight_u.t()
        ctx.coupled, ctx.form = coupled, form
        native = extension.ops(inputs)
        ctx.native = native
        if native is not None:
            time_steps = inputs.shape[0]
            y, beta_all = inputs.new_empty(2, time_steps, batch, size).unbind(0)
            # z_k, h_k and e_k of every step: recycled, fresh pages of this size cost more
            # than the loop's elementwise work
            numel = 3 * time_steps * steps * batch * size
            block = WORKSPACE.take(numel, inputs.dtype, inputs.device)
            saved = block[:numel].view(3, time_steps, steps, batch, size)
            native.tarnn_forward(inputs, s0, resets, weight_s_t, weight_u_t, eta, coupled,
                                 int(form.kernel), form.scale_out, y, beta_all, *saved)
            ctx.mark_non_differentiable(beta_all)
            ctx.save_for_backward(weight_s, weight_u, eta, beta_all)
            ctx.resets, ctx.saved, ctx.block = resets, saved, block
            if not any(ctx.needs_input_grad):
                WORKSPACE.give(block)
            return y, beta_all
        eta_column = eta.view(-1, 1, 1)
        masks = fastloop.reset_masks(resets)
        # At batch 16 a view costs as much as a small op: what a step keeps are fresh tensors,
        # and the buffers reused at every step have their views made once.
        eta_beta = inputs.new_empty(steps, batch, size)
        eta_beta_k = eta_beta.unbind(0)
        outputs, betas, euler, inner, targets = [], [], [], [], []
        s = s0
        for inputs_t, mask in zip(inputs.unbind(0), masks, strict=True):
            if mask is not None:
                s = s.masked_fill(mask, 0.0)
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
        y, beta_all = torch.stack(outputs), torch.stack(betas)
        ctx.mark_non_differentiable(beta_all)
        ctx.save_for_backward(weight_s, weight_u, eta, beta_all)
        ctx.masks = masks
        ctx.betas, ctx.euler, ctx.inner, ctx.targets = betas, euler, inner, targets
        return y, beta_all

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_y: Tensor, _grad_beta: Tensor | None) -> tuple[Tensor | None,
                                                                                ...]:
        weight_s, weight_u, eta, beta_all = ctx.saved_tensors
        coupled, form = ctx.coupled, ctx.form
        time_steps, batch, size = grad_y.shape
        half, steps = size // 2, len(eta)
        # ā = gain · h' ⊙ q, gain = s·m. The forward's weights already carry s;
        # m goes into the weights that carry ā back, and the gain into the gradients of the
        # blocks that produce a (W_2, U and the W_1 x + b inputs), once at the end.
        weight_s = weight_s * _block_scale(weight_s, size, (1.0, 1.0, form.scale_out))[:, None]
        weight_u = weight_u * form.scale_out
        if ctx.native is not None:
            if ctx.saved is None:
                raise RuntimeError("TARNN's chunk can be backpropagated once: its backward "
                                   "recycles the forward's buffers (no retain_graph)")
            euler, inner, targets = ctx.saved
            ctx.saved = None
            grad_gates, grad_next, grad_weight_u, grad_eta_terms = ctx.native.tarnn_backward(
                grad_y.contiguous(), ctx.resets, weight_s, weight_u, eta, beta_all, euler,
                inner, targets, coupled, int(form.kernel))
            result = _finish(ctx.needs_input_grad, form, grad_gates, grad_next, grad_weight_u,
                             grad_eta_terms, euler[:, 0])
            WORKSPACE.give(ctx.block)
            return result
        masks = ctx.masks
        betas, euler, inner, targets = ctx.betas, ctx.euler, ctx.inner, ctx.targets
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
                torch.addmm(carried, grad_pre_k[k], weight_u,
                            out=grad_z_k[k - 1] if k else grad_next)
            step_euler = torch.stack(euler[first:first + steps])
            step_slope = torch.stack(targets[first:first + steps]).sub_(step_euler)  # F_k
            torch.mul(step_slope, grad_z, out=grad_slope)
            torch.mv(grad_slope_rows.T, eta, out=grad_beta_flat)
            grad_eta_terms.addcmul_(grad_slope, beta)
            torch.cat([grad_beta * beta_slopes[t], q.sum(0), grad_pre.sum(0)], 1,
                      out=grad_gates_t)
            grad_weight_u.addmm_(grad_pre_rows, step_euler.view(-1, size))
            grad_next.addmm_(grad_gates_t, weight_s)
            mask = masks[t]
            if mask is not None:
                grad_next.masked_fill_(mask, 0.0)

        return _finish(ctx.needs_input_grad, form, grad_gates, grad_next, grad_weight_u,
                       grad_eta_terms, torch.stack(euler[::steps]))


def _finish(needs: tuple[bool, ...], form: activations.FastForm, grad_gates: Tensor,
            grad_next: Tensor, grad_weight_u: Tensor, grad_eta_terms: Tensor,
            states: Tensor) -> tuple[Tensor | None, ...]:
    """:meth:`_TARNNScan.backward`'s result from its loop's sums: the state weights' gradient
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
    """A vector of ``len(factors) · size`` entries, block i filled with ``factors[i]``."""
    return torch.tensor(factors, dtype=like.dtype, device=like.device).repeat_interleave(size)

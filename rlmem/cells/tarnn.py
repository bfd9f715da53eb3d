"""TARNN: the time-adaptive RNN (Kag & Saligrama, 2021), Eq. 5–6, Algorithm 1 and A.4.

Reference: A. Kag, V. Saligrama. "Time Adaptive Recurrent Neural Network", CVPR 2021.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells import activations
from rlmem.cells._engines import tarnn as engine
from rlmem.cells._engines.fast_forms import FAST_FORMS
from rlmem.cells._engines.onednn_linear import linear
from rlmem.cells.base import Cell, Dims
from rlmem.cells.registry import register
from rlmem.cells.time_loop import ScanResult

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
    form.

    The reference loop is :func:`~rlmem.cells.time_loop.scan` over :meth:`step`; its engine
    (:mod:`~rlmem.cells._engines.tarnn`) runs the same steps without autograd, with a
    hand-written backward pass.

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
        for projection in (self.B, self.W, self.U, self.U_s, self.W_x):
            nn.init.normal_(projection.weight, std=0.1)
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
        return linear(x, weight, bias)

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
        """One step, from ``x_t = project_input(x)[t]``: the docstring's equations."""
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

    def fast_scan(self, x: Tensor, state: TARNNState, resets: Tensor) -> ScanResult:
        return engine.fast_scan(
            self.project_input(x),
            engine.TARNNWeights(self.state_weight(), self.U.weight, self.eta), state, resets,
            coupled=self.A_form == "coupled", form=FAST_FORMS[self.phi_name])

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

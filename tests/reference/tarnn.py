"""TARNN: the time-adaptive RNN (Kag & Saligrama, 2021), Eq. 5–6, Algorithm 1 and A.4.

Reference: A. Kag, V. Saligrama. "Time Adaptive Recurrent Neural Network", CVPR 2021.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from reference import activations
from reference.base import Cell

A_FORMS = ("identity", "coupled")


class TARNNState(NamedTuple):
    s: Tensor
    """Hidden state :math:`s_{m-1}`, ``(B, D)``."""


class TARNN(Cell):
    r"""Time-adaptive RNN (Kag & Saligrama, 2021).

    With :math:`u_m = [x_m, s_{m-1}]` and learned time constants
    :math:`\beta = \sigma(U_s s_{m-1} + W_x x_m)`, the state solves the ODE (Eq. 5)

    .. math::
        \dot z = F(z) = \beta \odot (A z + B u_m + \phi(U z + W u_m)), \qquad z(0) = s_{m-1}

    by K Euler steps (Eq. 6) :math:`z^k = z^{k-1} + \eta_k F(z^{k-1})`, and :math:`s_m = z^K`.
    Where :math:`\beta_j \approx 0` the state is frozen and the input skipped; where
    :math:`\beta_j \approx 1` it moves to the equilibrium. ``A`` is fixed: ``identity`` is
    :math:`-I`, ``coupled`` is :math:`[A]_{ii} = -1, [A]_{i, i+D/2} = 1`.

    The step sizes :math:`\eta_k` are learned, one per Euler step and shared across time: the
    public code's one step size per timestep ties a model to its training length and breaks
    transfer to longer episodes. The optional regulariser of Theorem 1,
    :math:`\Omega = \gamma_1 \|A + B_2\|^2 + \gamma_2 \|U + W_2\|^2` (:math:`B_2, W_2` the
    blocks acting on :math:`s_{m-1}`), is returned as the aux loss ``omega``.

    Initialisation (A.4): weights from N(0, 0.1²), the bias of β at −3, other biases 0.

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

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {"s": ((self.hidden_size,), None)}

    def step(self, x_t: Tensor, state: TARNNState) -> tuple[Tensor, TARNNState,
                                                            dict[str, Tensor]]:
        s = state.s
        u = torch.cat([x_t, s], dim=-1)
        beta = torch.sigmoid(self.U_s(s) + self.W_x(x_t))
        drive_b, drive_w = self.B(u), self.W(u)  # constant over the Euler steps
        z = s
        for k in range(self.K):
            z = z + self.eta[k] * beta * (z @ self.A.T + drive_b + self.phi(self.U(z) + drive_w))
        return z, TARNNState(z), {"beta": beta}

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
                **{f"eta_{k}": self.eta[k].detach() for k in range(self.K)}}

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, K={self.K}, A={self.A_form!r}, "
                f"nonlinearity={self.phi_name!r}, gamma1={self.gamma1}, gamma2={self.gamma2}")

"""ERNN: the equilibrated RNN (Zhang, Kag, Sullivan & Saligrama, 2019), Eq. 9–12.

Reference: Z. Zhang, A. Kag, A. Sullivan, V. Saligrama. "Equilibrated Recurrent Neural Network:
Neuronal Time-Delayed Self-Feedback Improves Accuracy and Stability", arXiv:1903.00755, 2019.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from reference import activations
from reference.base import Cell


class ERNNState(NamedTuple):
    h: Tensor
    """Hidden state :math:`h_{t-1}`, ``(B, D)``."""


class ERNN(Cell):
    r"""Equilibrated RNN: inexact-Newton fixed-point iterations with learned step sizes.

    From :math:`h^{(0)} = h_{t-1}`, K iterations of Eq. 9 with the map of Eq. 11–12:

    .. math::
        h^{(k)} = (1 - \eta_k)\, h^{(k-1)}
                  + \eta_k\, \sigma\big((I + U)(V h^{(k-1)} + W x_t + b)\big), \qquad
        h_t = h^{(K)}

    which approach the fixed point :math:`h = \sigma((I + U)(V h + W x_t + b))`. The
    :math:`\eta_k` are learned, may go negative, and are shared across time (per iteration
    only), so the cell transfers to longer sequences.

    Args:
        input_size: features of each input.
        hidden_size: D, features of the state.
        K: fixed-point iterations per step (paper default: 1).
        eta: initial step size (paper: 1e-2).
        nonlinearity: σ (the paper uses ``relu``).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`ERNNState`, ``(B, hidden_size)``
        - traces: ``residual`` ``(T, B)``, the fixed-point residual norm after the last step
    """

    state_type = ERNNState

    def __init__(self, input_size: int, hidden_size: int, *, K: int = 1, eta: float = 1e-2,
                 nonlinearity: str = "relu") -> None:
        super().__init__(input_size, hidden_size)
        if K < 1:
            raise ValueError(f"ERNN: K must be ≥ 1, got {K}")
        self.K, self.phi_name = K, nonlinearity
        self.phi = activations.nonlinearity(nonlinearity, "ERNN")
        self.U = nn.Linear(hidden_size, hidden_size, bias=False)
        self.V = nn.Linear(hidden_size, hidden_size, bias=False)
        self.W = nn.Linear(input_size, hidden_size)
        self.eta = nn.Parameter(torch.full((K,), float(eta)))

    def target(self, h: Tensor, drive: Tensor) -> Tensor:
        r""":math:`\sigma((I + U)(V h + W x + b))`, the map whose fixed point is sought."""
        pre = self.V(h) + drive
        return self.phi(pre + self.U(pre))

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {"h": ((self.hidden_size,), None)}

    def step(self, x_t: Tensor, state: ERNNState) -> tuple[Tensor, ERNNState,
                                                           dict[str, Tensor]]:
        drive = self.W(x_t)
        h = state.h
        for k in range(self.K):
            h = (1.0 - self.eta[k]) * h + self.eta[k] * self.target(h, drive)
        residual = (self.target(h, drive) - h).norm(dim=-1)
        return h, ERNNState(h), {"residual": residual}

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        return {"residual": traces["residual"].mean(),
                **{f"eta_{k}": self.eta[k].detach() for k in range(self.K)}}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, K={self.K}, nonlinearity={self.phi_name!r}"

"""ERNN: the equilibrated RNN (Zhang, Kag, Sullivan & Saligrama, 2019), Eq. 9–12.

Reference: Z. Zhang, A. Kag, A. Sullivan, V. Saligrama. "Equilibrated Recurrent Neural Network:
Neuronal Time-Delayed Self-Feedback Improves Accuracy and Stability", arXiv:1903.00755, 2019.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells import activations
from rlmem.cells._engines import ernn as engine
from rlmem.cells._engines.onednn_linear import linear
from rlmem.cells.base import Cell, Dims
from rlmem.cells.registry import register
from rlmem.cells.time_loop import ScanResult


class ERNNState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]
    """Hidden state :math:`h_{t-1}`, ``(B, D)``."""


@register("ernn")
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

    How it is computed (the same map, rearranged; the parameters keep their names):
    :math:`(I + U)(V h + W x_t + b) = M h + d_t` with :math:`M = (I + U) V`, formed once per
    call, and :math:`d_t = (I + U)(W x_t + b)`, one matmul over the whole sequence
    (:meth:`project_input`). An iteration is then one matmul.

    The reference loop is :func:`~rlmem.cells.time_loop.scan` over :meth:`step`; its engine
    (:mod:`~rlmem.cells._engines.ernn`) shares the products with M between steps.

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
        r""":math:`\sigma((I + U)(V h + W x + b))`, the map whose fixed point is sought, in the
        paper's form (``drive`` is :math:`W x + b`)."""
        pre = self.V(h) + drive
        return self.phi(pre + self.U(pre))

    def fixed_point_weight(self) -> Tensor:
        r""":math:`M = (I + U) V`, so that the map is :math:`\sigma(M h + d_t)`.

        Shapes:
            - returns ``(hidden_size, hidden_size)``
        """
        return self.V.weight + self.U.weight @ self.V.weight

    def project_input(self, x: Tensor) -> Tensor:
        """:math:`d_t = (I + U)(W x_t + b)` for every step at once.

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, hidden_size)``
        """
        weight, bias = self.W.weight, self.W.bias
        return linear(x, weight + self.U.weight @ weight, bias + self.U.weight @ bias)

    def step(self, x_t: Tensor, state: ERNNState) -> tuple[Tensor, ERNNState,
                                                           dict[str, Tensor]]:
        """One step, from ``x_t = project_input(x)[t]``: the docstring's equations."""
        weight_t = self.fixed_point_weight().T
        h = state.h
        for k in range(self.K):
            h = torch.lerp(h, self.phi(h @ weight_t + x_t), self.eta[k])
        residual = (self.phi(h @ weight_t + x_t) - h).norm(dim=-1)
        return h, ERNNState(h), {"residual": residual}

    def fast_scan(self, x: Tensor, state: ERNNState, resets: Tensor) -> ScanResult:
        return engine.fast_scan(
            self.project_input(x), engine.ERNNWeights(self.fixed_point_weight().T, self.eta),
            state, resets, self.phi)

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        return {"residual": traces["residual"].mean(),
                **{f"eta_{k}": self.eta[k].detach() for k in range(self.K)}}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, K={self.K}, nonlinearity={self.phi_name!r}"

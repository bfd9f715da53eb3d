"""The incremental RNN (Kag, Zhang & Saligrama, 2020), Eq. 4–8.

Not the identity-initialised ReLU RNN of Le et al. (2015), which shares the acronym.

Reference: A. Kag, Z. Zhang, V. Saligrama. "RNNs Incrementally Evolving on an Equilibrium
Manifold: A Panacea for Vanishing and Exploding Gradients?", ICLR 2020.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Annotated, Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from rlmem.cells import activations
from rlmem.cells._engines import irnn as engine
from rlmem.cells._engines.onednn_linear import linear
from rlmem.cells._engines.weight_cache import prepared
from rlmem.cells.base import Cell, Dims
from rlmem.cells.options import enum_option
from rlmem.cells.registry import register
from rlmem.cells.time_loop import ScanResult


class IRNNState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]
    """Hidden state :math:`h_{k-1}`, ``(B, D)``."""


class IRNNUpdate(Enum):
    r"""The equation whose residual the Euler steps of a round follow; the value is the
    paper's equation number, the name what configs spell (``memory.update_rule=eq5``).

    Both read :math:`\phi(\cdot) - \alpha (g + h_{k-1})`; they differ in φ's argument.
    """

    eq5 = 5
    r""":math:`\phi(U(g + h_{k-1}) + W x_k + b)`: the CTRNN of Eq. 3, discretised (Eq. 5)."""
    eq8 = 8
    r""":math:`\phi(P[U(g + h_{k-1}) + W x_k + b])` with :math:`P = U`: the parametrised update
    of Eq. 8, which the paper uses in all its experiments (§4.1, "Implementation")."""


def _low_rank(z: Tensor, V: Tensor, H: Tensor) -> Tensor:
    """:math:`(I + V H) z` on rows ``z`` ``(..., D)``, in O(D r) per row."""
    return z + (z @ H.T) @ V.T


class _Eq8Weights(NamedTuple):
    """Eq. 8's weights with P = U multiplied in (:meth:`IncrementalRNN._eq8_weights`)."""

    transition: Tensor
    r""":math:`U^2` ``(D, D)`` when U is full; when :math:`U = I + VH`, the factor
    :math:`2H + HVH` ``(r, D)`` of :math:`U^2 = I + V(2H + HVH)`."""
    input_weight: Tensor
    """:math:`P W`, ``(D, input_size)``."""
    input_bias: Tensor
    """:math:`P b`, ``(D,)``."""


@register("irnn")
class IncrementalRNN(Cell):
    r"""Incremental RNN (iRNN); ``K=1`` is SiRNN (Kag et al., 2020).

    Each round k runs K Euler steps towards the equilibrium of the round, from
    :math:`g_0 = 0`:

    .. math::
        g_i = g_{i-1} + \eta_i \big(\phi(a(g_{i-1} + h_{k-1})) - \alpha (g_{i-1} + h_{k-1})\big),
        \qquad h_k = g_K

    with φ's argument given by ``update_rule`` (:class:`IRNNUpdate`):

    .. math::
        \text{Eq. 5:}\quad a(z) = U z + W x_k + b \qquad\qquad
        \text{Eq. 8:}\quad a(z) = P\,[U z + W x_k + b], \quad P = U

    Eq. 8 is written with α = 1, the default here; the paper keeps α a fixed constant
    (``learn_alpha=False``), and with ``learn_alpha=True`` it is learned as well. As K grows,
    :math:`h_k` reaches the equilibrium where the residual
    :math:`\phi(a(g + h_{k-1})) - \alpha (g + h_{k-1})` vanishes, and the gradient across
    rounds becomes identity-like (Theorem 1). The step sizes :math:`\eta_i` are learned and
    shared across time (one per Euler step), so the cell transfers to longer sequences.

    U is a full matrix, or with ``rank`` set the low-rank form of §3.2,
    :math:`U = I + V H` with :math:`V \in \mathbb R^{D \times r}, H \in \mathbb R^{r \times D}`.
    The paper's Eq. 8 uses :math:`P = U = I + VH` (it does not report r): set ``rank`` for
    it. Without ``rank``, Eq. 8 reads :math:`P = U` with U full, which is the low-rank form at
    r = D up to the initialisation (U starts from torch's ``Linear`` initialisation, not
    from I).

    How it is computed (the same equations; the parameters keep their names): φ's argument
    is an operator on :math:`g + h_{k-1}` plus a drive, :math:`a(z) = A z + d_k`, with
    :math:`A = U, d_k = W x_k + b` (Eq. 5) or :math:`A = U^2, d_k = (UW) x_k + Ub` (Eq. 8).
    The drives of a sequence are one batched pass (:meth:`project_input`), and A is formed
    once per call (:meth:`transition`; :math:`U^2 = I + V(2H + HVH)` keeps the low rank).

    The reference loop is :func:`~rlmem.cells.time_loop.scan` over :meth:`step`, one round per
    step; its engine (:mod:`~rlmem.cells._engines.irnn`) shares the products with A between
    rounds.

    A checkpoint records its ``update_rule``. One saved before the option existed was trained
    with Eq. 5 and a learned α: it loads only into ``update_rule=eq5`` (with
    ``learn_alpha=True`` to train on); Eq. 8 raises an error that says so.

    Args:
        input_size: features of each input :math:`x_k`.
        hidden_size: D, features of the state.
        K: Euler steps per round (1: SiRNN).
        eta: initial step size (paper: 1e-2). With K=1 the state is η-scaled, so it starts
            nearly memoryless. Test MSE on adding at T=30 after 400 updates (the budget of
            ``benchmarks/irnn_steps.py``, seed 0; baseline 0.167): the defaults (Eq. 8, full
            U) do not learn, 0.163, nor with K = 5 and η from 0.01 to 0.5 (0.16); Eq. 8 in the
            paper's low-rank form with a larger η does: 0.007 with ``K=1, rank=8, eta=1``
            (SiRNN, the model the paper tabulates), 0.008 with ``K=10, rank=8, eta=0.5``.
            Eq. 5 with α fixed: 0.014 (K=1), 0.008 (``K=5``), 0.002 (``K=5, eta=0.5``); with
            α learned, rlmem's earlier default, 0.160 (K=1) and 0.020 (``K=5``). The budget is
            seed-sensitive for every variant: seeds 1 and 2 give 0.034 and 0.149 for the
            SiRNN above, 0.013 and 0.161 for Eq. 5 with ``K=5``.
        alpha: α (Eq. 8 as written: 1).
        learn_alpha: learn α (a parameter); by default it stays fixed (a buffer), as in the
            paper.
        update_rule: :attr:`IRNNUpdate.eq8` (the paper's experiments) or :attr:`IRNNUpdate.eq5`
            (rlmem before this option); a member or its name.
        nonlinearity: φ (the paper uses ``relu``).
        rank: if set, U = I + VH with this rank (§3.2); otherwise U is a full matrix.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`IRNNState`, ``(B, hidden_size)``
        - traces: ``residual`` ``(T, B)``, the norm of the residual after the last step
    """

    state_type = IRNNState

    def __init__(self, input_size: int, hidden_size: int, *, K: int = 1, eta: float = 1e-2,
                 alpha: float = 1.0, learn_alpha: bool = False,
                 update_rule: IRNNUpdate = IRNNUpdate.eq8, nonlinearity: str = "relu",
                 rank: int | None = None) -> None:
        super().__init__(input_size, hidden_size)
        if K < 1:
            raise ValueError(f"IncrementalRNN: K must be ≥ 1, got {K}")
        if rank is not None and not 1 <= rank <= hidden_size:
            raise ValueError(f"IncrementalRNN: rank must be in [1, hidden_size], got {rank}")
        self.update_rule = enum_option(IRNNUpdate, update_rule, "IncrementalRNN", "update_rule")
        self.K, self.phi_name, self.rank, self.learn_alpha = K, nonlinearity, rank, learn_alpha
        self.phi = activations.nonlinearity(nonlinearity, "IncrementalRNN")
        self.W = nn.Linear(input_size, hidden_size)
        if rank is None:
            self.U = nn.Linear(hidden_size, hidden_size, bias=False)
        else:
            self.V = nn.Parameter(torch.randn(hidden_size, rank) * hidden_size ** -0.5)
            self.H = nn.Parameter(torch.zeros(rank, hidden_size))
        self.eta = nn.Parameter(torch.full((K,), float(eta)))
        alpha_value = torch.tensor(float(alpha))
        if learn_alpha:
            self.alpha = nn.Parameter(alpha_value)
        else:
            self.register_buffer("alpha", alpha_value)

    def recurrent(self, z: Tensor) -> Tensor:
        """:math:`U z`, with U full or :math:`I + VH`."""
        if self.rank is None:
            return self.U(z)
        return _low_rank(z, self.V, self.H)

    def transition(self) -> Callable[[Tensor], Tensor]:
        r"""``z ↦ A z``, the operator on :math:`g + h_{k-1}` inside φ: U (Eq. 5) or
        :math:`PU = U^2` (Eq. 8), its matrix formed once for the whole call."""
        if self.update_rule is IRNNUpdate.eq5:
            return self.recurrent
        squared = self._eq8_weights().transition
        if self.rank is None:
            return lambda z: F.linear(z, squared)
        V = self.V
        return lambda z: _low_rank(z, V, squared)

    def _eq8_weights(self) -> _Eq8Weights:
        """The products of P = U with Eq. 8's terms. Without autograd (a rollout) they are kept
        until a parameter changes: forming them costs more than a step."""
        def build() -> _Eq8Weights:
            if self.rank is None:
                U = self.U.weight
                return _Eq8Weights(U @ U, U @ self.W.weight, self.W.bias @ U.T)
            # (I + VH)² = I + V (2H + HVH): still rank r.
            return _Eq8Weights(torch.addmm(2.0 * self.H, self.H @ self.V, self.H),
                               _low_rank(self.W.weight.T, self.V, self.H).T,
                               _low_rank(self.W.bias, self.V, self.H))
        return prepared(self, build)

    def residual(self, g: Tensor, h: Tensor, drive: Tensor,
                 transition: Callable[[Tensor], Tensor] | None = None) -> Tensor:
        r""":math:`\phi(A(g + h) + d) - \alpha (g + h)`, zero at the equilibrium; ``drive`` is
        :math:`d`, a step of :meth:`project_input`."""
        transition = self.transition() if transition is None else transition
        total = g + h
        return self.phi(transition(total) + drive) - self.alpha * total

    def project_input(self, x: Tensor) -> Tensor:
        """The drive :math:`d_k` for every step at once: :math:`W x_k + b` (Eq. 5) or
        :math:`P(W x_k + b)` (Eq. 8).

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, hidden_size)``
        """
        if self.update_rule is IRNNUpdate.eq5:
            return linear(x, self.W.weight, self.W.bias)
        weights = self._eq8_weights()
        return linear(x, weights.input_weight, weights.input_bias)

    def step(self, x_t: Tensor, state: IRNNState) -> tuple[Tensor, IRNNState,
                                                           dict[str, Tensor]]:
        """One round, from ``x_t = project_input(x)[t]``: the docstring's equations."""
        transition = self.transition()
        g = torch.zeros_like(state.h)
        for i in range(self.K):
            g = g + self.eta[i] * self.residual(g, state.h, x_t, transition)
        residual = self.residual(g, state.h, x_t, transition).norm(dim=-1)
        return g, IRNNState(g), {"residual": residual}

    def fast_scan(self, x: Tensor, state: IRNNState, resets: Tensor) -> ScanResult:
        return engine.fast_scan(
            self.project_input(x), engine.IRNNWeights(self.transition(), self.eta, self.alpha),
            state, resets, self.phi)

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        learned = {"alpha": self.alpha.detach()} if self.learn_alpha else {}
        return {"residual": traces["residual"].mean(), **learned,
                **{f"eta_{i}": self.eta[i].detach() for i in range(self.K)}}

    def get_extra_state(self) -> Tensor:
        """The update rule's equation number (5 or 8), saved with the weights."""
        return torch.tensor(self.update_rule.value)

    def set_extra_state(self, state: Any) -> None:
        """Refuse weights trained with another update: the same weights compute another map."""
        saved = IRNNUpdate(int(state))
        if saved is not self.update_rule:
            raise ValueError(
                f"IncrementalRNN: these weights were trained with update_rule={saved.name}; "
                f"this cell has update_rule={self.update_rule.name}. Build it with "
                f"update_rule={saved.name} (memory.update_rule={saved.name}).")

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, K={self.K}, update_rule={self.update_rule.name}, "
                f"learn_alpha={self.learn_alpha}, nonlinearity={self.phi_name!r}, "
                f"rank={self.rank}")

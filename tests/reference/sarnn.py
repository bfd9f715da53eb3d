"""SA-RNN: the selective-activation RNN (Hartvigsen et al., 2020), §3.

Reference: T. Hartvigsen, C. Sen, X. Kong, E. Rundensteiner. "Learning to Selectively Update
State Neurons in Recurrent Networks", CIKM 2020.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from reference.base import Cell
from reference.lstm import GRU_UPDATE_GATE, init_gate_bias


class SARNNState(NamedTuple):
    h: Tensor
    """Hidden state :math:`h_{t-1}`, ``(B, H)``."""


def hard_sigmoid(x: Tensor, slope: Tensor | float) -> Tensor:
    r""":math:`\max(0, \min(1, (\alpha x + 1) / 2))`, the slope-α hard sigmoid of Chung et al."""
    return ((slope * x + 1.0) * 0.5).clamp(0.0, 1.0)


def binarize(probability: Tensor) -> Tensor:
    r"""Eq. 5–6, :math:`\mathbb 1[\tilde u > 0.5]`, with the straight-through gradient of Eq. 8."""
    hard = (probability > 0.5).to(probability.dtype)
    return probability + (hard - probability).detach()


class SARNN(Cell):
    r"""Selective-activation RNN on a GRU base (Hartvigsen et al., 2020).

    A coordinator decides, per neuron and step, whether to update:

    .. math::
        \tilde u_t &= \mathrm{hardsigmoid}_\alpha(w_u \odot h_{t-1} + W_i x_t + b_u) \\
        u_t &= \mathbb 1[\tilde u_t > 0.5] \quad \text{(straight-through gradient)} \\
        h_t &= u_t \odot \mathrm{GRU}(h_{t-1}, x_t) + (1 - u_t) \odot h_{t-1}

    with :math:`W_u = \mathrm{diag}(w_u)`. The loss adds the update budget
    :math:`\lambda \sum_t \tilde u_t` (Eq. 9; summed over steps and neurons, averaged over the
    batch), returned as the aux loss ``budget``. The slope follows
    :math:`\alpha = \min(\alpha_{max}, 1 + 0.04 \cdot \text{epoch})` through :meth:`anneal`,
    with ``progress · anneal_epochs`` standing in for the epoch. The reported metric is
    Skip % (Eq. 10), the fraction of neuron updates skipped.

    Args:
        input_size: features of each input.
        hidden_size: H, neurons of the GRU.
        lam: λ, weight of the update budget (the paper: 0 is a reasonable default; 1e-4–2e-3
            in its tables).
        slope_max: the largest slope α of the annealing schedule (paper: 5).
        slope_rate: slope increase per epoch (paper: 0.04).
        anneal_epochs: the number of epochs that training progress 0 → 1 stands for.
        update_bias: initial bias of the GRU's update gate z (see :class:`~rlmem.cells.GRU`).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`SARNNState`, ``(B, hidden_size)``
        - traces: ``update`` :math:`u_t` and ``update_probability`` :math:`\tilde u_t`,
          ``(T, B, hidden_size)``
    """

    state_type = SARNNState

    def __init__(self, input_size: int, hidden_size: int, *, lam: float = 0.0,
                 slope_max: float = 5.0, slope_rate: float = 0.04,
                 anneal_epochs: float = 100.0, update_bias: float = 0.0) -> None:
        super().__init__(input_size, hidden_size)
        if lam < 0:
            raise ValueError(f"SARNN: lam (λ) must be ≥ 0, got {lam}")
        self.lam, self.slope_max, self.slope_rate = lam, slope_max, slope_rate
        self.anneal_epochs = anneal_epochs
        self.update_bias = update_bias
        self.gru = nn.GRUCell(input_size, hidden_size)
        init_gate_bias(self.gru.bias_ih, self.gru.bias_hh, hidden_size, GRU_UPDATE_GATE,
                       update_bias)
        self.w_u = nn.Parameter(torch.empty(hidden_size))  # the diagonal of W_u
        self.W_i = nn.Linear(input_size, hidden_size)
        # A schedule value, not recurrent state: a buffer so that a checkpoint restores it.
        self.register_buffer("slope", torch.tensor(1.0))
        nn.init.uniform_(self.w_u, -hidden_size ** -0.5, hidden_size ** -0.5)

    def anneal(self, progress: float) -> None:
        epoch = min(max(progress, 0.0), 1.0) * self.anneal_epochs
        self.slope.fill_(min(self.slope_max, 1.0 + self.slope_rate * epoch))

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {"h": ((self.hidden_size,), None)}

    def step(self, x_t: Tensor, state: SARNNState) -> tuple[Tensor, SARNNState,
                                                            dict[str, Tensor]]:
        h = state.h
        probability = hard_sigmoid(self.w_u * h + self.W_i(x_t), self.slope)
        update = binarize(probability)
        h_new = update * self.gru(x_t, h) + (1.0 - update) * h
        return h_new, SARNNState(h_new), {"update": update, "update_probability": probability}

    def aux_losses(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        if not self.lam:
            return {}
        probability = traces["update_probability"]
        return {"budget": self.lam * probability.sum(dim=(0, 2)).mean()}

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        return {"skip_percent": 100.0 * (1.0 - traces["update"].mean()),
                "update_probability": traces["update_probability"].mean(),
                "slope": self.slope.clone()}

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, lam={self.lam}, slope={float(self.slope):.3g}, "
                f"slope_max={self.slope_max}, update_bias={self.update_bias}")

"""SA-RNN: the selective-activation RNN (Hartvigsen et al., 2020), §3.

Reference: T. Hartvigsen, C. Sen, X. Kong, E. Rundensteiner. "Learning to Selectively Update
State Neurons in Recurrent Networks", CIKM 2020.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells._engines import sarnn as engine
from rlmem.cells._engines.onednn_linear import linear
from rlmem.cells.base import Cell, Dims
from rlmem.cells.gate_bias import GRU_UPDATE_GATE, init_gate_bias
from rlmem.cells.registry import register
from rlmem.cells.time_loop import ScanResult


class SARNNState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]
    """Hidden state :math:`h_{t-1}`, ``(B, H)``."""


def hard_sigmoid(x: Tensor, slope: Tensor | float) -> Tensor:
    r""":math:`\max(0, \min(1, (\alpha x + 1) / 2))`, the slope-α hard sigmoid of Chung et al."""
    return ((slope * x + 1.0) * 0.5).clamp(0.0, 1.0)


def binarize(probability: Tensor) -> Tensor:
    r"""Eq. 5–6, :math:`\mathbb 1[\tilde u > 0.5]`, with the straight-through gradient of Eq. 8."""
    hard = (probability > 0.5).to(probability.dtype)
    return probability + (hard - probability).detach()


@register("sarnn")
class SARNN(Cell):
    r"""Selective-activation RNN on a GRU base (Hartvigsen et al., 2020).

    A coordinator decides, per neuron and step, whether to update:

    .. math::
        \tilde u_t &= \mathrm{hardsigmoid}_\alpha(w_u \odot h_{t-1} + W_i x_t + b_u) \\
        u_t &= \mathbb 1[\tilde u_t > 0.5] \quad \text{(straight-through gradient)} \\
        h_t &= u_t \odot \mathrm{GRU}(h_{t-1}, x_t) + (1 - u_t) \odot h_{t-1}

    with :math:`W_u = \mathrm{diag}(w_u)`. The loss adds the update budget
    :math:`\lambda \sum_t \tilde u_t` (Eq. 9; summed over steps and neurons, averaged over the
    batch), returned as the aux loss ``budget``; the paper's λ converts as described under
    "λ and Eq. 9" below. The slope follows
    :math:`\alpha = \min(\alpha_{max}, 1 + 0.04 \cdot \text{epoch})` through :meth:`anneal`,
    with ``progress · anneal_epochs`` standing in for the epoch. The reported metric is
    Skip % (Eq. 10), the fraction of neuron updates skipped.

    How it is computed (the same equations; the parameters keep their names): the input
    terms, the GRU's :math:`W_{ih} x_t + b_{ih}` and the coordinator's :math:`W_i x_t + b_u`,
    are one matmul over the whole sequence (:meth:`project_input`), and the GRU step is
    written out around its one recurrent matmul :math:`W_{hh} h_{t-1} + b_{hh}`.

    The reference loop is :func:`~rlmem.cells.time_loop.scan` over :meth:`step`; its engine
    (:mod:`~rlmem.cells._engines.sarnn`) runs the same steps without autograd, with a
    hand-written backward pass.

    λ and Eq. 9: the paper's objective is, per sequence i of length T,
    :math:`\mathcal L_{task}^{(i)} + \lambda_{paper} \sum_{t=1}^{T} \tilde u^{(i)}_t`, averaged
    over the N sequences, with one task loss per sequence (its tasks classify or regress a
    whole sequence). Here ``budget`` is :math:`\lambda \frac1B \sum_b \sum_{t \in
    \text{call}} \sum_{n=1}^{H} \tilde u_{t,b,n}`: summed over the L steps of one call (one
    chunk) and over the neurons (the ℓ1 norm of :math:`\tilde u_t \ge 0`; an implementation
    that averages over neurons has H times our λ), averaged over the batch. So:

    - a per-sequence task loss and a call that covers the sequence (``rlmem.supervised`` on
      adding: the MSE of the last output): Eq. 9 term for term, :math:`\lambda =
      \lambda_{paper}`;
    - a task loss that is a mean over steps, as copy's and denoise's cross-entropy and the PPO
      loss (a mean over a minibatch's steps) are: per step the budget weighs
      :math:`\lambda L` against a loss of weight 1, while Eq. 9 over a sequence loss that
      counts each step once (their sum) weighs :math:`\lambda_{paper}`. Use
      :math:`\lambda = \lambda_{paper} / L`, with L the steps per call: the sequence length
      (copy's T + 2·recall) in ``rlmem.supervised``, ``agent.recurrence`` (the chunk) in our
      PPO. sb3-contrib's RecurrentPPO calls the cell on its sequences (a rollout split at
      episode starts, padded at the end to the longest in the minibatch), so there L is that
      padded length, which varies, and the budget also counts the padded steps.

    Args:
        input_size: features of each input.
        hidden_size: H, neurons of the GRU.
        lam: λ, weight of the update budget (the paper: 0 is a reasonable default; 1e-4–2e-3
            in its tables, for per-sequence losses: see "λ and Eq. 9" to convert).
        slope_max: the largest slope α of the annealing schedule (paper: 5).
        slope_rate: slope increase per epoch (paper: 0.04).
        anneal_epochs: the number of epochs that training progress 0 → 1 stands for.
        update_bias: initial bias of the GRU's update gate z (see :class:`~rlmem.cells.GRU`;
            torch's 0 by default: on MemoryS7, 1 did not make SA-RNN learn faster).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`SARNNState`, ``(B, hidden_size)``
        - traces: ``update`` :math:`u_t` and ``update_probability`` :math:`\tilde u_t`,
          ``(T, B, hidden_size)``
    """

    state_type = SARNNState

    slope: Tensor
    """The hard sigmoid's slope α, annealed by :meth:`anneal` (a buffer: checkpoints keep it)."""

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

    def project_input(self, x: Tensor) -> Tensor:
        r"""The input terms of every step at once, in blocks ``[n, u, r, z]``.

        .. math::
            p_t = [W_{in} x_t + b_{in},\; W_i x_t + b_u,\; W_{ir} x_t + b_{ir},\;
                   W_{iz} x_t + b_{iz}]

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, 4 · hidden_size)``
        """
        size = self.hidden_size
        weight, bias = self.gru.weight_ih, self.gru.bias_ih
        return linear(
            x, torch.cat([weight[2 * size:], self.W_i.weight, weight[:2 * size]]),
            torch.cat([bias[2 * size:], self.W_i.bias, bias[:2 * size]]))

    def step(self, x_t: Tensor, state: SARNNState) -> tuple[Tensor, SARNNState,
                                                            dict[str, Tensor]]:
        """One step, from ``x_t = project_input(x)[t]``: the docstring's equations."""
        size = self.hidden_size
        h = state.h
        input_n, input_u, input_rz = x_t.split([size, size, 2 * size], 1)
        hidden = functional.linear(h, self.gru.weight_hh, self.gru.bias_hh)
        r, z = torch.sigmoid(input_rz + hidden[:, :2 * size]).chunk(2, 1)
        n = torch.tanh(input_n + r * hidden[:, 2 * size:])
        gru = n + z * (h - n)  # (1 - z) n + z h
        probability = hard_sigmoid(self.w_u * h + input_u, self.slope)
        update = binarize(probability)
        h_new = update * gru + (1.0 - update) * h
        return h_new, SARNNState(h_new), {"update": update, "update_probability": probability}

    def fast_scan(self, x: Tensor, state: SARNNState, resets: Tensor) -> ScanResult:
        return engine.fast_scan(
            self.project_input(x),
            engine.SARNNWeights(self.gru.weight_hh, self.gru.bias_hh, self.w_u), state, resets,
            self.slope)

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

r"""FFM: Fast and Forgetful Memory (Morad et al., 2023).

Reference: S. Morad, R. Kortvelesy, S. Liwicki, A. Prorok. "Reinforcement Learning with Fast
and Forgetful Memory", NeurIPS 2023 (the FFM cell, Fig. 2); the authors' code,
github.com/proroklab/ffm.
"""

from __future__ import annotations

import math
from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells._engines.associative_scan import Affine
from rlmem.cells._engines.onednn_linear import Linear, linear
from rlmem.cells.base import Dims
from rlmem.cells.linear_recurrence import LinearRecurrence
from rlmem.cells.registry import register

ALPHA_MAX = -1e-8
r"""The largest decay exponent α: :math:`|\gamma| < 1`, so every trace fades (as the authors'
code clamps it)."""

FORGOTTEN_AT = 0.01
r"""The fraction of an input left in the slowest trace after ``max_period`` steps, at
initialisation (the authors' ``forgotten_at``)."""

ALPHA_MIN_INIT = -(math.log(torch.finfo(torch.float64).max) / 1024 - 0.01) + 0.01
r"""The fastest initial decay exponent, ≈ −0.673: the authors' code's lower bound for α
(``-log(max float64) / max_len + fudge`` with its defaults ``max_len = 1024``, fudge 0.01)."""


class FFMState(NamedTuple):
    S_re: Annotated[Tensor, Dims("memory_size", "context_size")]
    r"""Real part of the complex memory :math:`S_{t-1}`, ``(B, m, c)``."""
    S_im: Annotated[Tensor, Dims("memory_size", "context_size")]
    r"""Imaginary part of :math:`S_{t-1}`, ``(B, m, c)``."""


@register("ffm")
class FFM(LinearRecurrence):
    r"""Fast and Forgetful Memory (Morad et al., 2023).

    An input-gated trace of the inputs, decayed and rotated in time by
    :math:`\gamma = \exp(\alpha + i\omega)` (the aggregator), read out through an output gate:

    .. math::
        \tilde x_t &= \ell_1(x_t) \odot \sigma(\ell_2(x_t)) \in \mathbb R^m \\
        S_t &= \gamma \odot S_{t-1} + \tilde x_t \mathbf 1_c^\top \in \mathbb C^{m \times c},
        \qquad \gamma_{jk} = \exp(\alpha_j + i \omega_k) \\
        z_t &= \ell_3([\mathrm{Re}\, S_t, \mathrm{Im}\, S_t]) \\
        g_t &= \sigma(\ell_4(x_t)) \qquad
        y_t = \mathrm{LN}(z_t) \odot g_t + \ell_5(x_t) \odot (1 - g_t)

    with :math:`\alpha \in \mathbb R^m` (decay, clamped to :math:`\le -10^{-8}`),
    :math:`\omega \in \mathbb R^c` (oscillation), :math:`\ell_i` affine maps and
    :math:`\mathrm{LN}` a LayerNorm without affine parameters. Unrolled,
    :math:`S_t = \sum_{j \le t} \gamma^{t - j} \odot \tilde x_j \mathbf 1_c^\top` since the
    episode started: each trace remembers the relative time of its inputs by their phase and
    forgets them at rate :math:`e^{\alpha}`. The reference loop is
    :func:`~rlmem.cells.base.scan` over :meth:`step` (the recurrence above, one step); a chunk
    runs through the associative scan (:mod:`~rlmem.cells._engines.associative_scan`), in
    place of the authors' cumulative-sum aggregator (both are parallel in time).

    Initialisation (the authors' code): :math:`\alpha_j` evenly spaced from
    :math:`\approx -0.673` to :math:`\ln(0.01) / \text{max\_period}`, so the slowest trace
    keeps 1 % of an input after ``max_period`` steps; :math:`\omega_k = 2\pi / P_k` with the
    periods :math:`P_k` evenly spaced on ``[min_period, max_period]``; the linear maps torch's
    default. Defaults: m = 32 traces and c = 4 complex contexts, the authors' POPGym model
    (its ``context_size = 8`` counts real and imaginary parts).

    Departures: the authors' code computes the aggregator as a cumulative sum of
    :math:`\gamma^{-j} \tilde x_j` (which bounds α below to avoid overflow, and clamps the
    parameter in place); the associative scan needs no bound, so α is only clamped above, in
    the forward pass. The memory is held in the parameters' precision (the authors' code keeps
    a complex64 state and float64 decays).

    Args:
        input_size: features of each input.
        hidden_size: features of the output :math:`y_t`.
        memory_size: m, the number of traces (decay rates α).
        context_size: c, the number of complex contexts per trace (oscillations ω).
        min_period: the shortest initial period :math:`2\pi/\omega`, in steps.
        max_period: the longest initial period, and the horizon of the slowest initial decay.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`FFMState`, two ``(B, m, c)`` fields
    """

    state_type = FFMState

    def __init__(self, input_size: int, hidden_size: int, *, memory_size: int = 32,
                 context_size: int = 4, min_period: float = 1.0,
                 max_period: float = 1024.0) -> None:
        super().__init__(input_size, hidden_size)
        for name, value in (("memory_size", memory_size), ("context_size", context_size)):
            if value <= 0:
                raise ValueError(f"FFM: {name} must be positive, got {value}")
        if not 0 < min_period <= max_period:
            raise ValueError(f"FFM: need 0 < min_period ≤ max_period, got {min_period}, "
                             f"{max_period}")
        self.memory_size, self.context_size = memory_size, context_size
        self.min_period, self.max_period = min_period, max_period
        # [ℓ1 (m), ℓ5 (H), ℓ2 (m), ℓ4 (H)]: every map of the input in one matmul.
        self.pre = Linear(input_size, 2 * memory_size + 2 * hidden_size)
        self.alpha = nn.Parameter(torch.empty(memory_size))
        self.omega = nn.Parameter(torch.empty(context_size))
        self.mix = Linear(2 * memory_size * context_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size, elementwise_affine=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The authors' initialisation of α and ω (the class docstring); the maps torch's."""
        slowest = max(min(-1e-6, math.log(FORGOTTEN_AT) / self.max_period), ALPHA_MIN_INIT)
        with torch.no_grad():
            self.alpha.copy_(torch.linspace(ALPHA_MIN_INIT, slowest, self.memory_size))
            periods = torch.linspace(self.min_period, self.max_period, self.context_size)
            self.omega.copy_(2 * math.pi / periods)
        self.pre.reset_parameters()
        self.mix.reset_parameters()

    def gamma(self) -> Tensor:
        r""":math:`\gamma = \exp(\alpha + i\omega)`, ``(m, c)`` complex."""
        alpha = self.alpha.clamp(max=ALPHA_MAX)
        modulus = torch.exp(alpha).unsqueeze(1)
        return torch.complex(modulus * torch.cos(self.omega), modulus * torch.sin(self.omega))

    def project_input(self, x: Tensor) -> Tensor:
        r"""Every step's :math:`[\ell_1(x_t), \ell_5(x_t), \ell_2(x_t), \ell_4(x_t)]`: one
        matmul, whose columns are the :meth:`parts`.

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, 2 m + 2 H)``
        """
        return self.pre(x)

    def parts(self, x: Tensor) -> tuple[Tensor, ...]:
        r""":math:`\ell_1(x_t), \ell_5(x_t), \ell_2(x_t), \ell_4(x_t)`, views of one matmul."""
        return self.split(self.pre(x))

    def split(self, features: Tensor) -> tuple[Tensor, ...]:
        return tuple(features.split([self.memory_size, self.hidden_size, self.memory_size,
                                     self.hidden_size], -1))

    def gated_input(self, parts: tuple[Tensor, ...]) -> Tensor:
        r""":math:`\tilde x_t \mathbf 1_c^\top`, complex: ``(*, m, c)``."""
        value, _, gate, _ = parts
        # In the parameters' precision: bf16 autocast gives bf16 features, which torch.complex
        # does not take.
        gated = (value * torch.sigmoid(gate)).to(self.alpha.dtype).unsqueeze(-1)
        gated = gated.expand(*gated.shape[:-1], self.context_size)
        return torch.complex(gated, torch.zeros_like(gated))

    def transition(self, parts: tuple[Tensor, ...]) -> Affine:
        return Affine(self.gamma(), self.gated_input(parts))

    def step(self, x_t: Tensor, state: FFMState) -> tuple[Tensor, FFMState, dict[str, Tensor]]:
        r""":math:`S_t = \gamma \odot S_{t-1} + \tilde x_t \mathbf 1_c^\top`, then the readout."""
        parts = self.split(x_t)
        S = self.gamma() * self.unpack(state) + self.gated_input(parts)
        return self.readout(parts, S), self.pack(S), {}

    def readout(self, parts: tuple[Tensor, ...], s: Tensor) -> Tensor:
        r""":math:`y_t = \mathrm{LN}(\ell_3([\mathrm{Re}\,S_t, \mathrm{Im}\,S_t])) \odot g_t +
        \ell_5(x_t) \odot (1 - g_t)`."""
        _, through, _, out_gate = parts
        # ℓ3's columns are [Re S, Im S]; S read as (real, imaginary) pairs needs no copy, so
        # the columns are put in that order instead.
        pairs = self.mix.weight.unflatten(1, (2, -1)).transpose(1, 2).flatten(1)
        z = linear(torch.view_as_real(s).flatten(-3), pairs, self.mix.bias)
        gate = torch.sigmoid(out_gate)
        return torch.lerp(through, self.norm(z), gate)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, memory_size={self.memory_size}, "
                f"context_size={self.context_size}, min_period={self.min_period}, "
                f"max_period={self.max_period}")

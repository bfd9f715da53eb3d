r"""LRU: the linear recurrent unit (Orvieto et al., 2023), in its residual block.

Reference: A. Orvieto, S. L. Smith, A. Gu, A. Fernando, C. Gulcehre, R. Pascanu, S. De.
"Resurrecting Recurrent Neural Networks for Long Sequences", ICML 2023 (§3, Appendix A).
"""

from __future__ import annotations

import math
from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells._engines.associative_scan import Affine
from rlmem.cells._engines.onednn_linear import Linear, linear
from rlmem.cells.base import Dims
from rlmem.cells.linear_recurrence import LinearRecurrence
from rlmem.cells.registry import register


class LRUState(NamedTuple):
    h_re: Annotated[Tensor, Dims("N")]
    r"""Real part of the complex state :math:`h_{t-1}`, ``(B, N)``."""
    h_im: Annotated[Tensor, Dims("N")]
    r"""Imaginary part of :math:`h_{t-1}`, ``(B, N)``."""


@register("lru")
class LRU(LinearRecurrence):
    r"""Linear recurrent unit (Orvieto et al., 2023) in the paper's residual block.

    A complex diagonal linear recurrence with the exponential parametrisation and the
    :math:`\gamma` normalisation (§3), inside the block of the paper's Fig. 1 (a
    linear encoder, then normalisation, the LRU, GELU and a GLU, with a skip connection):

    .. math::
        u_t &= W_{enc} x_t + b_{enc} \qquad z_t = \mathrm{LN}(u_t) \\
        \lambda &= \exp(-\exp(\nu^{\log}) + i \exp(\theta^{\log})) \qquad
        \gamma = \exp(\gamma^{\log}) \\
        h_t &= \lambda \odot h_{t-1} + \gamma \odot (B z_t) \\
        \tilde y_t &= \mathrm{Re}(C h_t) + D \odot z_t \\
        y_t &= u_t + \mathrm{GLU}(\mathrm{GELU}(\tilde y_t)), \qquad
        \mathrm{GLU}(v) = (W_1 v + b_1) \odot \sigma(W_2 v + b_2)

    with :math:`B = B^{re} + i B^{im} \in \mathbb C^{N \times H}`,
    :math:`C = C^{re} + i C^{im} \in \mathbb C^{H \times N}`, :math:`D \in \mathbb R^H` and
    :math:`H` = ``hidden_size``. The reference loop is :func:`~rlmem.cells.base.scan` over
    :meth:`step` (the recurrence above, one step); a chunk runs through the associative scan
    (:mod:`~rlmem.cells._engines.associative_scan`), since :math:`h_t` is linear in
    :math:`h_{t-1}`.

    Initialisation (Appendix A): :math:`|\lambda|` uniform on the ring
    :math:`[r_{min}, r_{max}]` (uniform in :math:`|\lambda|^2`), its phase uniform on
    :math:`[0, \theta_{max}]`; :math:`\gamma^{\log} = \log\sqrt{1 - |\lambda|^2}`; :math:`B`'s
    real and imaginary parts :math:`\mathcal N(0, 1/(2H))`, :math:`C`'s
    :math:`\mathcal N(0, 1/N)`, :math:`D` :math:`\mathcal N(0, 1)`. The defaults of
    ``r_min``, ``r_max`` and ``max_phase`` are those of the paper's Appendix A code; its
    long-range tasks use :math:`r_{min} = 0.9`, :math:`r_{max} = 0.999`.

    Departures: the block's normalisation is a LayerNorm (the paper uses LayerNorm or
    BatchNorm; a BatchNorm would couple the batch items, which the cell contract rules out),
    one block (stack with ``num_layers``), no dropout inside the block.

    Args:
        input_size: features of each input.
        hidden_size: H, the model width: the encoder's output, the block's output.
        N: the number of complex state units (None: ``hidden_size``).
        r_min: smallest initial modulus :math:`|\lambda|`.
        r_max: largest initial modulus :math:`|\lambda|` (below 1: the recurrence is stable).
        max_phase: largest initial phase :math:`\theta_{max}` of :math:`\lambda`.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`LRUState`, two ``(B, N)`` fields
    """

    state_type = LRUState

    def __init__(self, input_size: int, hidden_size: int, *, N: int | None = None,
                 r_min: float = 0.0, r_max: float = 1.0,
                 max_phase: float = 2 * math.pi) -> None:
        super().__init__(input_size, hidden_size)
        if N is not None and N <= 0:
            raise ValueError(f"LRU: N must be a positive int or None, got {N}")
        if not 0.0 <= r_min < r_max <= 1.0:
            raise ValueError(f"LRU: need 0 ≤ r_min < r_max ≤ 1, got r_min={r_min}, "
                             f"r_max={r_max}")
        self.N = N if N is not None else hidden_size
        self.r_min, self.r_max, self.max_phase = r_min, r_max, max_phase
        size = self.N
        self.encoder = Linear(input_size, hidden_size)
        self.norm = nn.LayerNorm(hidden_size)
        self.nu_log = nn.Parameter(torch.empty(size))
        self.theta_log = nn.Parameter(torch.empty(size))
        self.gamma_log = nn.Parameter(torch.empty(size))
        self.B_re = nn.Parameter(torch.empty(size, hidden_size))
        self.B_im = nn.Parameter(torch.empty(size, hidden_size))
        self.C_re = nn.Parameter(torch.empty(hidden_size, size))
        self.C_im = nn.Parameter(torch.empty(hidden_size, size))
        self.D = nn.Parameter(torch.empty(hidden_size))
        self.glu = Linear(hidden_size, 2 * hidden_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The paper's initialisation (Appendix A), as the class docstring says."""
        with torch.no_grad():
            u1, u2 = torch.rand(self.N), torch.rand(self.N)
            # |λ|² uniform on [r_min², r_max²]; ν = -log|λ| (clamped off 0 so its log exists)
            modulus_sq = u1 * (self.r_max ** 2 - self.r_min ** 2) + self.r_min ** 2
            self.nu_log.copy_(torch.log((-0.5 * torch.log(modulus_sq)).clamp_min(1e-8)))
            self.theta_log.copy_(torch.log((self.max_phase * u2).clamp_min(1e-8)))
            self.gamma_log.copy_(0.5 * torch.log((1 - modulus_sq).clamp_min(1e-8)))
            for weight, std in ((self.B_re, (2 * self.hidden_size) ** -0.5),
                                (self.B_im, (2 * self.hidden_size) ** -0.5),
                                (self.C_re, self.N ** -0.5), (self.C_im, self.N ** -0.5),
                                (self.D, 1.0)):
                nn.init.normal_(weight, std=std)

    def lam(self) -> Tensor:
        r""":math:`\lambda = \exp(-\exp(\nu^{\log}) + i \exp(\theta^{\log}))`, ``(N,)`` complex."""
        modulus = torch.exp(-torch.exp(self.nu_log))
        phase = torch.exp(self.theta_log)
        return torch.complex(modulus * torch.cos(phase), modulus * torch.sin(phase))

    def parts(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r"""Every step's :math:`u_t`, :math:`z_t` and :math:`\gamma \odot B z_t`, the last as
        ``N`` (real, imaginary) pairs.

        Shapes:
            - x: ``(*, input_size)``; returns ``(*, H)``, ``(*, H)``, ``(*, 2 N)``
        """
        u = self.encoder(x)
        z = self.norm(u)
        # B's real and imaginary rows interleaved, each scaled by its γ: one matmul gives
        # γ ⊙ B z as pairs, which view_as_complex reads without a copy.
        gamma = torch.exp(self.gamma_log).unsqueeze(1)
        B_pairs = torch.stack([gamma * self.B_re, gamma * self.B_im], 1).flatten(0, 1)
        return u, z, linear(z, B_pairs)

    def split(self, features: Tensor) -> tuple[Tensor, ...]:
        return tuple(features.split([self.hidden_size, self.hidden_size, 2 * self.N], -1))

    def transition(self, parts: tuple[Tensor, ...]) -> Affine:
        return Affine(self.lam(), torch.view_as_complex(parts[2].unflatten(-1, (self.N, 2))))

    def step(self, x_t: Tensor, state: LRUState) -> tuple[Tensor, LRUState, dict[str, Tensor]]:
        r""":math:`h_t = \lambda \odot h_{t-1} + \gamma \odot (B z_t)`, then the readout."""
        parts = self.split(x_t)
        h = self.lam() * self.unpack(state) + self.transition(parts).b
        return self.readout(parts, h), self.pack(h), {}

    def readout(self, parts: tuple[Tensor, ...], s: Tensor) -> Tensor:
        r""":math:`y_t = u_t + \mathrm{GLU}(\mathrm{GELU}(\mathrm{Re}(C h_t) + D \odot z_t))`."""
        u, z, _ = parts
        # Re(C h) = C_re Re h − C_im Im h: one matmul over h's (real, imaginary) pairs.
        C_pairs = torch.stack([self.C_re, -self.C_im], -1).flatten(-2)
        mixed = torch.addcmul(linear(torch.view_as_real(s).flatten(-2), C_pairs),
                              self.D, z)
        # GLU(v) = (W_1 v + b_1) ⊙ σ(W_2 v + b_2): torch's glu over the two halves of one
        # product, whose backward writes both halves' gradient at once (no concatenation)
        return u + functional.glu(self.glu(functional.gelu(mixed)), -1)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, N={self.N}, r_min={self.r_min}, r_max={self.r_max}, "
                f"max_phase={self.max_phase:.3g}")

r"""modReLU (Arjovsky, Shah & Bengio, 2016), the nonlinearity of ReLRNN on denoise.

Reference: M. Arjovsky, A. Shah, Y. Bengio. "Unitary Evolution Recurrent Neural Networks",
ICML 2016. Kerg et al. (2020) use it for ReLRNN on denoise and sequential MNIST (their
Tables 6 and 8).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

MODRELU_BIAS_INIT = 0.01
"""The bias starts uniform in ``[-0.01, 0.01]``, as in the expRNN code (Lezcano-Casado &
Martínez-Rubio, 2019) that the orthogonal baselines of Kerg et al. run."""


class ModReLU(nn.Module):
    r"""modReLU with a learned bias per unit:

    .. math::
        \mathrm{modReLU}(z)_i = \mathrm{relu}(|z_i| + b_i)\, \frac{z_i}{|z_i|}
        = \mathrm{sign}(z_i)\, \max(|z_i| + b_i, 0)

    On real inputs :math:`z/|z|` is the sign (0 at 0). A negative :math:`b_i` is a dead zone
    :math:`|z_i| \le -b_i` mapped to 0; a positive one pushes the output away from 0.

    Args:
        features: number of units, each with its bias :math:`b_i`.

    Shapes:
        - z: ``(..., features)``; returns the same shape
    """

    def __init__(self, features: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.empty(features).uniform_(-MODRELU_BIAS_INIT,
                                                                MODRELU_BIAS_INIT))

    def forward(self, z: Tensor) -> Tensor:
        return torch.sign(z) * torch.relu(z.abs() + self.bias)

    def extra_repr(self) -> str:
        return f"features={self.bias.shape[0]}"

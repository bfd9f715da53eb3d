r"""φ for the engines that compute their own gradients (TARNN's): each nonlinearity of
:mod:`rlmem.cells.activations` as :math:`\phi(a) = m \, h(s a) + o`, with a cheap kernel
:math:`h` whose derivative follows from its output.

``tanh`` is the one rewritten: :math:`\tanh(a) = 2 \sigma(2 a) - 1`, the same function, because
on CPU ``torch.tanh`` costs about three times ``torch.sigmoid`` (six times at batch 64). The two
differ by rounding only (≤ 4e-16 in float64, ≤ 2e-7 in float32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

import torch
from torch import Tensor


def _sigmoid_derivative(output: Tensor, out: Tensor) -> Tensor:
    return torch.addcmul(output, output, output, value=-1.0, out=out)  # σ - σ² = σ'


def _relu_derivative(output: Tensor, out: Tensor) -> Tensor:
    return torch.sign(output, out=out)  # relu(a) ≥ 0: 1 where a > 0, else 0


class Kernel(IntEnum):
    """The kernel :math:`h` of a :class:`FastForm`, as the compiled loops (``csrc/tarnn.h``)
    number it."""

    SIGMOID = 0
    RELU = 1


@dataclass(frozen=True)
class FastForm:
    r""":math:`\phi(a) = m \, h(s a) + o`, for loops that compute their own gradients.

    A loop applies :attr:`inner` in place to :math:`s a` (folding :math:`s` into the weights
    that produce :math:`a`) and keeps :math:`h`; :math:`\phi'(a) = s m \, h'(s a)` follows
    from it as ``gain * inner_derivative(h, out)``, for many steps' :math:`h` at once. Plain
    elementwise ops rather than ATen's ``*_backward`` kernels, whose call from Python costs
    three times as much at batch 16.
    """

    inner: Callable[[Tensor], Tensor]
    """:math:`h`, in place: ``inner(t)`` overwrites and returns ``t``."""
    inner_derivative: Callable[[Tensor, Tensor], Tensor]
    """``(h(u), out) -> h'(u)``, written into ``out``."""
    kernel: Kernel
    """Which :math:`h` this is, for the compiled loops."""
    scale_in: float = 1.0
    """:math:`s`."""
    scale_out: float = 1.0
    """:math:`m`."""
    shift: float = 0.0
    """:math:`o`."""

    @property
    def gain(self) -> float:
        """:math:`s m`: :math:`\\phi'(a)` is ``gain * inner_derivative(h, out)``."""
        return self.scale_in * self.scale_out


FAST_FORMS: dict[str, FastForm] = {
    "tanh": FastForm(torch.sigmoid_, _sigmoid_derivative, Kernel.SIGMOID, scale_in=2.0,
                     scale_out=2.0, shift=-1.0),
    "relu": FastForm(torch.relu_, _relu_derivative, Kernel.RELU),
    "sigmoid": FastForm(torch.sigmoid_, _sigmoid_derivative, Kernel.SIGMOID),
}
"""Every name of :data:`rlmem.cells.activations.NONLINEARITIES`, as a :class:`FastForm` (a
cell checks the name when it is built, with :func:`rlmem.cells.activations.nonlinearity`)."""

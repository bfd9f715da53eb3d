"""The nonlinearities φ the ODE-based cells accept, by the names their papers use.

Besides φ itself (:func:`nonlinearity`, for autograd), each name has a :class:`FastForm` for
the hand-written time loops: φ written as :math:`\\phi(a) = m \\, h(s a) + o` with a cheap
kernel :math:`h` whose derivative follows from its output. ``tanh`` is the one rewritten:
:math:`\\tanh(a) = 2 \\sigma(2 a) - 1`, the same function, because on CPU ``torch.tanh`` costs
about three times ``torch.sigmoid`` (six times at batch 64). The two differ by rounding only
(≤ 4e-16 in float64, ≤ 2e-7 in float32).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

import torch
from torch import Tensor

NONLINEARITIES: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
}


def _sigmoid_derivative(output: Tensor, out: Tensor) -> Tensor:
    return torch.addcmul(output, output, output, value=-1.0, out=out)  # σ - σ² = σ'


def _relu_derivative(output: Tensor, out: Tensor) -> Tensor:
    return torch.sign(output, out=out)  # relu(a) ≥ 0: 1 where a > 0, else 0


class Kernel(IntEnum):
    """The kernel :math:`h` of a :class:`FastForm`, as the compiled loops
    (``rlmem/cells/csrc/loops.cpp``) number it."""

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


V = TypeVar("V")


def _lookup(table: Mapping[str, V], name: str, owner: str) -> V:
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"{owner}: unknown nonlinearity {name!r}; valid: "
                         f"{', '.join(sorted(table))}") from None


def nonlinearity(name: str, owner: str) -> Callable[[Tensor], Tensor]:
    """Look up φ by name, with an error that lists the valid names."""
    return _lookup(NONLINEARITIES, name, owner)


def fast_form(name: str, owner: str) -> FastForm:
    """φ named ``name`` as a :class:`FastForm`, with the same error as :func:`nonlinearity`."""
    return _lookup(FAST_FORMS, name, owner)

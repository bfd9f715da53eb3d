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
from typing import TypeVar

import torch
from torch import Tensor

NONLINEARITIES: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
}


def _sigmoid_backward(grad: Tensor, output: Tensor, out: Tensor) -> Tensor:
    return torch.ops.aten.sigmoid_backward.grad_input(grad, output, grad_input=out)


def _relu_backward(grad: Tensor, output: Tensor, out: Tensor) -> Tensor:
    return torch.ops.aten.threshold_backward.grad_input(grad, output, 0, grad_input=out)


@dataclass(frozen=True)
class FastForm:
    r""":math:`\phi(a) = m \, h(s a) + o`, for loops that compute their own gradients.

    A loop applies :attr:`inner` in place to :math:`s a` (folding :math:`s` into the weights
    that produce :math:`a`), keeps :math:`h` for the backward pass, and gets
    :math:`\bar a = s m \, h'(s a) \odot \bar\phi` as ``gain * inner_backward(grad, h, out)``.
    """

    inner: Callable[[Tensor], Tensor]
    """:math:`h`, in place: ``inner(t)`` overwrites and returns ``t``."""
    inner_backward: Callable[[Tensor, Tensor, Tensor], Tensor]
    """``(grad, h(u), out) -> grad ⊙ h'(u)``, written into ``out``: the ATen kernels that
    autograd itself uses."""
    scale_in: float = 1.0
    """:math:`s`."""
    scale_out: float = 1.0
    """:math:`m`."""
    shift: float = 0.0
    """:math:`o`."""

    @property
    def gain(self) -> float:
        """:math:`s m`: :math:`\\phi'(a) \\odot g` is ``gain * inner_backward(g, h, out)``."""
        return self.scale_in * self.scale_out


FAST_FORMS: dict[str, FastForm] = {
    "tanh": FastForm(torch.sigmoid_, _sigmoid_backward, scale_in=2.0, scale_out=2.0, shift=-1.0),
    "relu": FastForm(torch.relu_, _relu_backward),
    "sigmoid": FastForm(torch.sigmoid_, _sigmoid_backward),
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

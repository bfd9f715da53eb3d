"""The nonlinearities φ the ODE-based cells accept, by the names their papers use.

Each comes with its derivative expressed through its *output*, ``grad ⊙ φ'(a)`` from
``φ(a)``, which is what a hand-written backward needs: it keeps ``φ(a)`` from the forward pass
(it needs it anyway) instead of the pre-activation ``a``. These are the same ATen kernels that
autograd itself calls for ``tanh``, ``relu`` and ``sigmoid``, so the gradients are bit-identical
to autograd's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

NONLINEARITIES: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
}

NONLINEARITIES_INPLACE: dict[str, Callable[[Tensor], Tensor]] = {
    "tanh": torch.tanh_,
    "relu": torch.relu_,
    "sigmoid": torch.sigmoid_,
}
"""φ applied in place, for loops outside autograd that own their pre-activation buffer."""


def _relu_backward(grad: Tensor, output: Tensor) -> Tensor:
    return torch.ops.aten.threshold_backward.default(grad, output, 0)


NONLINEARITY_BACKWARDS: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "tanh": torch.ops.aten.tanh_backward.default,  # grad ⊙ (1 - φ²)
    "relu": _relu_backward,  # grad ⊙ 1[φ > 0]
    "sigmoid": torch.ops.aten.sigmoid_backward.default,  # grad ⊙ φ (1 - φ)
}
"""``(grad, φ(a)) -> grad ⊙ φ'(a)``, by name."""


def _lookup(table: dict[str, Callable], name: str, owner: str) -> Callable:
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"{owner}: unknown nonlinearity {name!r}; valid: "
                         f"{', '.join(sorted(table))}") from None


def nonlinearity(name: str, owner: str) -> Callable[[Tensor], Tensor]:
    """Look up φ by name, with an error that lists the valid names."""
    return _lookup(NONLINEARITIES, name, owner)


def nonlinearity_inplace(name: str, owner: str) -> Callable[[Tensor], Tensor]:
    """φ by name, applied in place to its argument (which it returns)."""
    return _lookup(NONLINEARITIES_INPLACE, name, owner)


def nonlinearity_backward(name: str, owner: str) -> Callable[[Tensor, Tensor], Tensor]:
    """``(grad, φ(a)) -> grad ⊙ φ'(a)`` for φ named ``name``."""
    return _lookup(NONLINEARITY_BACKWARDS, name, owner)

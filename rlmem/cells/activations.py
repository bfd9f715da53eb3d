"""The nonlinearities φ the ODE-based cells accept, by the names their papers use.

The engines that compute their own gradients use each in a form of their own
(:mod:`rlmem.cells._engines.fast_forms`), for every name here.
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


def nonlinearity(name: str, owner: str) -> Callable[[Tensor], Tensor]:
    """Look up φ by name, with an error that lists the valid names."""
    try:
        return NONLINEARITIES[name]
    except KeyError:
        raise ValueError(f"{owner}: unknown nonlinearity {name!r}; valid: "
                         f"{', '.join(sorted(NONLINEARITIES))}") from None

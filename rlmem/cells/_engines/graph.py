"""Whether a call builds an autograd graph: the engines' and the model's custom kernels run
their forward directly (no ``autograd.Function``, nothing saved for a backward) where not."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor


def needs_graph(tensors: Iterable[Tensor | None]) -> bool:
    """Whether autograd is on and any of ``tensors`` requires a gradient: a call on them must
    record its backward. Acting (``no_grad``, ``inference_mode``) never does; an
    ``autograd.Function``'s ``apply`` costs a few microseconds of Python there, beside an
    acting step's kernels of a few microseconds each."""
    return torch.is_grad_enabled() and any(
        tensor is not None and tensor.requires_grad for tensor in tensors)

"""Weights derived from a module's parameters, kept between calls without autograd.

The attentive cells (doubled weights) and iRNN (Eq. 8's products with P = U) derive weights
from their parameters before a step can run. In a rollout, one step per call without autograd,
forming them costs more than the step itself, so they are kept until a parameter changes.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn

_T = TypeVar("_T")

_PREPARED: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[Any, ...], Any]] = \
    weakref.WeakKeyDictionary()


def prepared(module: nn.Module, build: Callable[[], _T]) -> _T:
    """``build()``: weights derived from ``module``'s parameters (doubled, concatenated).

    Without autograd they are kept and reused until a parameter changes (a new tensor, or an
    in-place update such as an optimizer step): a rollout step would otherwise spend more on
    rebuilding them than on the step. Under autograd they are rebuilt every call, so that
    gradients reach the parameters.

    A change is seen by the parameters' version counters: a write that does not count itself
    there must be marked (``torch.autograd.graph.increment_version``), or the kept weights
    outlive it. torch's fused Adam is such a write; :class:`~rlmem.agents.ppo.update.PPO` marks
    its steps (``experiments/fast_trainer/FUSED_ADAM.md``).
    """
    parameters = list(module.parameters())
    if torch.is_grad_enabled() and any(p.requires_grad for p in parameters):
        return build()
    # Tensors made in inference mode cannot enter an autograd graph later: keyed by the mode.
    key = (torch.is_inference_mode_enabled(),
           *((p.data_ptr(), p._version, p.dtype, p.device) for p in parameters))
    hit = _PREPARED.get(module)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    _PREPARED[module] = (key, value)
    return value

"""Weights derived from a module's parameters, kept between calls without autograd.

The attentive cells (doubled weights) and iRNN (Eq. 8's products with P = U) derive weights
from their parameters before a step can run. In a rollout, one step per call without autograd,
forming them costs more than the step itself, so they are kept until a parameter changes.

A change is seen two ways: by the parameters' version counters, which every in-place write
through autograd's view of a tensor bumps (``copy_``, ``load_state_dict``, the ``foreach``
optimizer steps), and by any torch optimizer's step, counted here by a global step hook. The
second is needed because some writes do not count themselves on the version counters: torch's
fused Adam kernel is one (``p._version`` stays 0 after a fused step; torch 2.13). With only
the counters, relstm, relrnn, memlstm and irnn acted with their first weights for whole runs of
our PPO (``experiments/fast_trainer/FUSED_ADAM.md``), and would have in any trainer stepping
with that kernel (sb3-contrib's ``RecurrentPPO`` given ``optimizer_kwargs={"fused": True}``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch import Tensor, nn
from torch.optim.optimizer import register_optimizer_step_post_hook

_T = TypeVar("_T")

_PREPARED: weakref.WeakKeyDictionary[nn.Module, tuple[tuple[Any, ...], Any]] = \
    weakref.WeakKeyDictionary()

_optimizer_steps = 0
"""How many torch optimizer steps have ended in this process: part of every key, so a step
whose writes the version counters miss still renews the kept weights."""


def _count_optimizer_step(_optimizer: torch.optim.Optimizer, _args: Any, _kwargs: Any) -> None:
    global _optimizer_steps
    _optimizer_steps += 1


register_optimizer_step_post_hook(_count_optimizer_step)


def prepared(module: nn.Module, build: Callable[[], _T],
             inputs: Sequence[Tensor] | None = None) -> _T:
    """``build()``: weights derived from ``module``'s parameters (doubled, concatenated), or
    from ``inputs`` where given (the parameters ``build`` reads: a key of two tensors costs less
    than a walk over a module of many).

    Without autograd they are kept and reused until a parameter changes (a new tensor, an
    in-place write, or any torch optimizer's step): a rollout step would otherwise spend more
    on rebuilding them than on the step. Under autograd they are rebuilt every call, so that
    gradients reach the parameters.

    A write that is neither an optimizer step nor counted on the parameters' version counters
    (a custom kernel writing ``p.data`` in place) must be marked
    (``torch.autograd.graph.increment_version``), or the kept weights outlive it.
    """
    # under autograd the first parameter that requires a gradient settles it: no list of
    # them all (a module walk per call, in each of a PPO update's minibatches)
    if torch.is_grad_enabled() and any(p.requires_grad for p in (
            module.parameters() if inputs is None else inputs)):
        return build()
    parameters = list(module.parameters()) if inputs is None else inputs
    # Tensors made in inference mode cannot enter an autograd graph later: keyed by the mode.
    key = (_optimizer_steps, torch.is_inference_mode_enabled(),
           *((p.data_ptr(), p._version, p.dtype, p.device) for p in parameters))
    hit = _PREPARED.get(module)
    if hit is not None and hit[0] == key:
        return hit[1]
    value = build()
    _PREPARED[module] = (key, value)
    return value

"""One step of a fused ``torch.optim.Adam`` on the CPU, calling its kernel directly.

``Adam(fused=True).step()`` spends about as long in Python (its hooks and checks, gathering
each parameter's state, grouping the tensors by device and dtype) as in its one fused kernel:
on this project's 2-core machine, 183 µs a step against 90 µs for the same kernel called
directly, for the 21 weights of our PPO's MiniGrid model (a throwaway timing), about 6 ms of a
fast-preset update's 64 steps. :func:`fused_adam_step` gathers the lists itself and makes the
two calls that ``torch.optim.adam._fused_adam`` makes for a single device and dtype
(``_foreach_add_`` on the step counts, then ``_fused_adam_``), then the step's post hooks as
``step()`` calls them, so the weights and the state are those of ``optimizer.step()`` bit for
bit (``tests/agents/test_adam_step.py``). Wherever
that is not certain (not fused, several groups, AMSGrad, a state not yet made, another device
or dtype, a tensor learning rate, a pre hook) it calls ``optimizer.step()``.
"""

from __future__ import annotations

from itertools import chain

import torch
from torch import Tensor
from torch.optim import optimizer as optimizer_module


def fused_adam_step(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.step()`` for a fused CPU Adam, with the kernel called directly (the module
    docstring); any other optimizer steps as it would."""
    lists = _direct_lists(optimizer)
    if lists is None:
        optimizer.step()
        return
    params, grads, exp_avgs, exp_avg_sqs, steps = lists
    group = optimizer.param_groups[0]
    beta1, beta2 = group["betas"]
    torch._foreach_add_(steps, 1)
    torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False,
                       lr=group["lr"], beta1=beta1, beta2=beta2,
                       weight_decay=group["weight_decay"], eps=group["eps"], maximize=False,
                       grad_scale=None, found_inf=None)
    # the post hooks as step() calls them: the cells' weight cache counts steps by one, since
    # the fused kernel's writes leave the parameters' version counters as they were
    for hook in chain(optimizer._optimizer_step_post_hooks.values(),
                      optimizer_module._global_optimizer_post_hooks.values()):
        hook(optimizer, (optimizer,), {})


def _direct_lists(optimizer: torch.optim.Optimizer) -> tuple[list[Tensor], ...] | None:
    """The parameters with a gradient, their gradients, first and second moments and step
    counts, where the kernel can be called directly as ``optimizer.step()`` would; else None."""
    if (type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1
            or optimizer._optimizer_step_pre_hooks
            or optimizer_module._global_optimizer_pre_hooks):
        return None  # a pre hook may change step()'s arguments
    group = optimizer.param_groups[0]
    if (not group["fused"] or group["amsgrad"] or group["maximize"] or group["capturable"]
            or group["differentiable"] or group.get("decoupled_weight_decay", False)
            or isinstance(group["lr"], Tensor)):
        return None
    lists: tuple[list[Tensor], ...] = ([], [], [], [], [])
    for param in group["params"]:
        if param.grad is None:
            continue
        state = optimizer.state.get(param)
        if (not state or param.device.type != "cpu" or param.dtype != torch.float32
                or param.grad.is_sparse):
            return None  # the first step makes the state; the rest is torch's to handle
        for into, value in zip(lists, (param, param.grad, state["exp_avg"],
                                       state["exp_avg_sq"], state["step"]), strict=True):
            into.append(value)
    return lists if lists[0] else None

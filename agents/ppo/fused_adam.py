"""Adam with torch's fused kernel, its state kept as ``torch.optim.Adam(fused=True)`` keeps it.

Why not ``torch.optim.Adam(fused=True)`` itself: its methods (``add_param_group`` in the
constructor, ``zero_grad``, ``step``, ``state_dict``) import TorchDynamo the first time they
run, to exclude themselves from compilation; on this project's 2-core machine that import
takes about 1.4 s (``python -c "import torch, torch._dynamo"`` against ``import torch``:
2.7 s against 1.3 s), a third of a short run's whole process, and our PPO compiles nothing.
Its ``step()`` also spends about as long in Python (hooks, checks, gathering each
parameter's state, grouping the tensors by device and dtype) as in the fused kernel: 183 µs
a step against 90 µs for the kernel called directly, for the 21 weights of our PPO's MiniGrid
model (a throwaway timing), about 6 ms of a fast-preset update's 64 steps.

:class:`FusedAdam` makes the two calls that ``torch.optim.adam._fused_adam`` makes for one
device and dtype (``_foreach_add_`` on the step counts, then ``_fused_adam_``), makes each
parameter's state where ``Adam._init_group`` makes it (at its first step with a gradient:
zero moments, a float32 step count on the parameter's device), runs torch's global step
hooks as ``step()`` runs them (the cells' weight cache counts optimizer steps by one), and
reads and writes ``torch.optim.Adam``'s ``state_dict`` layout, so checkpoints move between
the two either way. Its weights and state are ``torch.optim.Adam(fused=True).step()``'s bit
for bit (``tests/agents/test_fused_adam_optimizer.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor
from torch.optim import optimizer as optimizer_module

FIXED = {"amsgrad": False, "maximize": False, "foreach": None, "capturable": False,
         "differentiable": False, "fused": True, "decoupled_weight_decay": False}
"""The options of ``torch.optim.Adam`` that this optimizer has only at these values, as its
parameter group records them."""


class FusedAdam:
    """Adam (Kingma & Ba, 2015) over one group of parameters, each step one fused kernel per
    device and dtype:

    .. math::
        m_t = β_1 m_{t-1} + (1 - β_1) g_t, \\quad v_t = β_2 v_{t-1} + (1 - β_2) g_t^2, \\quad
        θ_t = θ_{t-1} - η \\frac{m_t / (1 - β_1^t)}{\\sqrt{v_t / (1 - β_2^t)} + ε}

    (with ``weight_decay`` λ, :math:`g_t + λ θ_{t-1}` in place of :math:`g_t`).

    Args:
        params: the parameters, in the order the state dict numbers them.
        lr: η.
        betas: β₁ and β₂.
        eps: ε.
        weight_decay: λ (L2, added to the gradient as torch's Adam adds it).
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0) -> None:
        parameters = list(params)
        if not parameters:
            raise ValueError("FusedAdam got no parameters")
        if any(not parameter.is_floating_point() for parameter in parameters):
            raise ValueError("FusedAdam takes floating-point parameters only")
        self.param_groups: list[dict[str, Any]] = [
            {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, **FIXED,
             "params": parameters}]
        self.state: dict[Tensor, dict[str, Tensor]] = {}
        """Per parameter: ``step``, ``exp_avg`` (m) and ``exp_avg_sq`` (v), made at its
        first step with a gradient, in that order (the state dict keeps it)."""

    @property
    def params(self) -> list[Tensor]:
        return self.param_groups[0]["params"]

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient (``set_to_none``) or zero it in place."""
        for parameter in self.params:
            if parameter.grad is None:
                continue
            if set_to_none:
                parameter.grad = None
            else:
                parameter.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step of every parameter with a gradient."""
        for hook in optimizer_module._global_optimizer_pre_hooks.values():
            hook(self, (self,), {})  # type: ignore[arg-type]
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        for params, grads, exp_avgs, exp_avg_sqs, steps in self._lists().values():
            torch._foreach_add_(steps, 1)
            torch._fused_adam_(params, grads, exp_avgs, exp_avg_sqs, [], steps, amsgrad=False,
                               lr=group["lr"], beta1=beta1, beta2=beta2,
                               weight_decay=group["weight_decay"], eps=group["eps"],
                               maximize=False, grad_scale=None, found_inf=None)
        for hook in optimizer_module._global_optimizer_post_hooks.values():
            hook(self, (self,), {})  # type: ignore[arg-type]

    def _lists(self) -> dict[tuple[torch.device, torch.dtype], tuple[list[Tensor], ...]]:
        """Per device and dtype: the parameters with a gradient, their gradients, moments and
        step counts (making a parameter's state at its first gradient)."""
        lists: dict[tuple[torch.device, torch.dtype], tuple[list[Tensor], ...]] = {}
        for parameter in self.params:
            if parameter.grad is None:
                continue
            if parameter.grad.is_sparse:
                raise RuntimeError("FusedAdam does not take sparse gradients")
            state = self.state.get(parameter)
            if state is None:
                state = self.state[parameter] = {
                    "step": torch.zeros((), dtype=torch.float32, device=parameter.device),
                    "exp_avg": torch.zeros_like(parameter, memory_format=torch.preserve_format),
                    "exp_avg_sq": torch.zeros_like(parameter,
                                                   memory_format=torch.preserve_format)}
            into = lists.setdefault((parameter.device, parameter.dtype), ([], [], [], [], []))
            for values, value in zip(into, (parameter, parameter.grad, state["exp_avg"],
                                            state["exp_avg_sq"], state["step"]), strict=True):
                values.append(value)
        return lists

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim.Adam``'s layout: the states keyed by the parameter's index, the group's
        options with ``params`` as those indices."""
        index = {id(parameter): position for position, parameter in enumerate(self.params)}
        group = {key: value for key, value in self.param_groups[0].items() if key != "params"}
        return {"state": {index[id(parameter)]: state for parameter, state in self.state.items()},
                "param_groups": [{**group, "params": list(range(len(self.params)))}]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take a state dict of this class or of ``torch.optim.Adam`` (fused or not): its
        options (η, β, ε, λ) and its states, cast as torch casts them (the moments to each
        parameter's dtype and device; the step count to float32 there, as the fused kernel
        takes it).

        Raises:
            ValueError: it has another number of groups or parameters, or an option this class
                does not have (AMSGrad, maximize, ...).
        """
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
            raise ValueError(
                f"the optimizer state has {len(groups)} parameter groups of "
                f"{[len(group['params']) for group in groups]} parameters; this optimizer has "
                f"one of {len(self.params)}")
        saved = groups[0]
        others = {key: saved[key] for key in ("amsgrad", "maximize", "capturable",
                                               "differentiable", "decoupled_weight_decay")
                  if saved.get(key)}
        if others:
            raise ValueError(f"FusedAdam cannot continue an Adam state with {others}")
        by_index = dict(zip(saved["params"], self.params, strict=True))
        state = {}
        for index, values in state_dict["state"].items():
            parameter = by_index[index]
            if set(values) != {"step", "exp_avg", "exp_avg_sq"} or not all(
                    isinstance(value, Tensor) for value in values.values()):
                raise ValueError(f"parameter {index}'s Adam state is not the tensors step, "
                                 f"exp_avg and exp_avg_sq: {sorted(values)}")
            state[parameter] = {
                key: value.to(dtype=torch.float32 if key == "step" else parameter.dtype,
                              device=parameter.device) for key, value in values.items()}
        self.state = state
        self.param_groups[0].update({key: saved[key] for key in ("lr", "betas", "eps",
                                                                  "weight_decay")})

    def __repr__(self) -> str:
        group = self.param_groups[0]
        options = ", ".join(f"{key}={group[key]}" for key in ("lr", "betas", "eps",
                                                              "weight_decay"))
        return f"FusedAdam({len(self.params)} parameters, {options})"


"""A fused Adam's step with its kernel called directly (:mod:`rlmem.agents.ppo.adam_step`):
the weights and the optimizer's state of ``optimizer.step()``, bit for bit; any other
optimizer, or a case it does not take, steps as ``optimizer.step()``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from rlmem.agents.ppo import adam_step
from rlmem.agents.ppo.adam_step import fused_adam_step


def model() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3), nn.Linear(3, 2))


def trained(step: Callable[[torch.optim.Optimizer], None], steps: int = 5,
            **options: Any) -> tuple[nn.Module, dict[str, Any]]:
    """``model()`` after ``steps`` Adam steps taken by ``step``; the last layer gets no
    gradient on the third step."""
    net = model()
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3, eps=1e-5, **options)
    generator = torch.Generator().manual_seed(1)
    for index in range(steps):
        optimizer.zero_grad(set_to_none=True)
        x = torch.randn(16, 6, generator=generator)
        out = net[:3](x) if index == 2 else net(x)
        out.square().mean().backward()
        step(optimizer)
    return net, optimizer.state_dict()


def assert_same(left: tuple[nn.Module, dict[str, Any]],
                right: tuple[nn.Module, dict[str, Any]]) -> None:
    for a, b in zip(left[0].parameters(), right[0].parameters(), strict=True):
        assert torch.equal(a, b)
    states = [state["state"] for state in (left[1], right[1])]
    assert states[0].keys() == states[1].keys()
    for key in states[0]:
        for name in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(states[0][key][name], states[1][key][name]), (key, name)


@pytest.mark.parametrize("options", [{"fused": True}, {"fused": True, "weight_decay": 0.1},
                                     {"foreach": True}, {"fused": True, "amsgrad": True}])
def test_the_same_weights_and_state_as_optimizer_step(options: dict[str, Any]) -> None:
    assert_same(trained(fused_adam_step, **options),
                trained(lambda optimizer: optimizer.step(), **options))


def test_it_calls_the_kernel_directly_only_where_it_may(monkeypatch: pytest.MonkeyPatch) -> None:
    direct: list[bool] = []
    lists = adam_step._direct_lists

    def spy(optimizer: torch.optim.Optimizer) -> Any:
        result = lists(optimizer)
        direct.append(result is not None)
        return result

    monkeypatch.setattr(adam_step, "_direct_lists", spy)
    trained(fused_adam_step, fused=True)
    assert direct == [False, True, True, True, True]  # the first step makes the state
    direct.clear()
    trained(fused_adam_step, foreach=True)
    assert not any(direct)
    direct.clear()
    handle = register_optimizer_step_pre_hook(lambda *_: None)
    try:
        trained(fused_adam_step, fused=True)
    finally:
        handle.remove()
    assert not any(direct)  # a pre hook may change step()'s arguments: step() calls it


def test_the_post_hooks_run_as_in_optimizer_step() -> None:
    """The cells' weight cache counts optimizer steps by a global post hook (a fused step
    leaves the parameters' version counters as they were): the direct step calls it too, with
    the arguments ``step()`` gives it."""
    seen: list[tuple[bool, Any]] = []

    def hook(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        seen.append((args == (optimizer,), kwargs))

    results = []
    for step in (fused_adam_step, lambda optimizer: optimizer.step()):
        handle = register_optimizer_step_post_hook(hook)
        try:
            trained(step, fused=True)
        finally:
            handle.remove()
        results.append(seen.copy())
        seen.clear()
    assert results[0] == results[1] == [(True, {})] * 5

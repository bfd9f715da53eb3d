""":class:`~rlmem.agents.ppo.fused_adam.FusedAdam` against ``torch.optim.Adam(fused=True)``:
the same weights and state bit for bit, the same state dict, states moving between the two
either way, torch's global step hooks called as ``step()`` calls them, bad states refused; and
a training run that never imports TorchDynamo (the reason for the class)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

from rlmem.agents.ppo.fused_adam import FusedAdam

Optimizer = FusedAdam | torch.optim.Adam


def model(dtype: torch.dtype = torch.float32) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3),
                         nn.Linear(3, 2)).to(dtype)


def train(pair: tuple[nn.Sequential, Optimizer], steps: int, seed: int = 1) -> None:
    """``steps`` steps of ``pair``'s optimizer on its model, on random inputs; the last layer
    gets no gradient at the first and third (so its state is made later than the others')."""
    net, optimizer = pair
    generator = torch.Generator().manual_seed(seed)
    dtype = next(net.parameters()).dtype
    for index in range(steps):
        optimizer.zero_grad(set_to_none=True)
        x = torch.randn(16, 6, generator=generator, dtype=dtype)
        out = net[:3](x) if index in (0, 2) else net(x)
        out.square().mean().backward()
        optimizer.step()


def both(dtype: torch.dtype = torch.float32, **options: Any
         ) -> tuple[tuple[nn.Sequential, FusedAdam], tuple[nn.Sequential, torch.optim.Adam]]:
    mine, theirs = model(dtype), model(dtype)
    return ((mine, FusedAdam(mine.parameters(), lr=3e-3, eps=1e-5, **options)),
            (theirs, torch.optim.Adam(theirs.parameters(), lr=3e-3, eps=1e-5, fused=True,
                                      **options)))


def assert_same(left: tuple[nn.Module, Optimizer], right: tuple[nn.Module, Optimizer]) -> None:
    for a, b in zip(left[0].parameters(), right[0].parameters(), strict=True):
        assert torch.equal(a, b)
    states = [pair[1].state_dict() for pair in (left, right)]
    assert list(states[0]["state"]) == list(states[1]["state"])  # which, in which order
    for key, state in states[0]["state"].items():
        assert state.keys() == states[1]["state"][key].keys()
        for name, value in state.items():
            other = states[1]["state"][key][name]
            assert (value.dtype, value.device) == (other.dtype, other.device), (key, name)
            assert torch.equal(value, other), (key, name)
    assert states[0]["param_groups"] == states[1]["param_groups"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("options", [{}, {"weight_decay": 0.1}, {"betas": (0.8, 0.99)}])
def test_the_weights_state_and_state_dict_of_torchs_fused_adam(
        dtype: torch.dtype, options: dict[str, Any]) -> None:
    mine, theirs = both(dtype, **options)
    for pair in (mine, theirs):
        train(pair, steps=6)
    assert_same(mine, theirs)


@pytest.mark.parametrize("into", ["FusedAdam", "torch"])
def test_a_state_goes_on_in_either_optimizer(into: str) -> None:
    """Three steps in one, the state loaded into a fresh one of the other kind, three more:
    the weights and state of six steps in one torch fused Adam."""
    mine, theirs = both()
    first, second = (theirs, mine) if into == "FusedAdam" else (mine, theirs)
    train(first, steps=3)
    second[0].load_state_dict(first[0].state_dict())
    second[1].load_state_dict(first[1].state_dict())
    train(second, steps=3, seed=2)
    reference = both()[1]
    train(reference, steps=3)
    train(reference, steps=3, seed=2)
    assert_same(second, reference)


def test_a_foreach_state_goes_on_fused() -> None:
    """A checkpoint of torch's ``foreach`` Adam (the exact reference's): its options and state
    taken, the step count a float32 on the parameter's device, as the fused kernel takes it."""
    net = model()
    foreach = torch.optim.Adam(net.parameters(), lr=1e-3, eps=1e-6, foreach=True)
    train((net, foreach), steps=2)
    fused = FusedAdam(net.parameters(), lr=3e-3, eps=1e-5)
    fused.load_state_dict(foreach.state_dict())
    group = fused.param_groups[0]
    assert (group["lr"], group["eps"], group["fused"], group["foreach"]) == (1e-3, 1e-6,
                                                                              True, None)
    for state in fused.state.values():
        assert state["step"].dtype == torch.float32 and float(state["step"]) in (1.0, 2.0)
    train((net, fused), steps=1)


def test_the_global_step_hooks_run_as_step_runs_them() -> None:
    """The cells' weight cache counts optimizer steps by a global post hook (a fused step
    leaves the parameters' version counters as they were)."""
    seen: dict[str, list[Any]] = {"mine": [], "theirs": []}

    def hooks(into: list[Any]) -> tuple[Callable[..., None], Callable[..., None]]:
        return (lambda optimizer, args, kwargs: into.append(("pre", args == (optimizer,),
                                                             kwargs)),
                lambda optimizer, args, kwargs: into.append(("post", args == (optimizer,),
                                                             kwargs)))

    pairs: tuple[tuple[nn.Sequential, Optimizer], ...] = both()
    for name, pair in zip(seen, pairs, strict=True):
        pre, post = hooks(seen[name])
        handles = [register_optimizer_step_pre_hook(pre),
                   register_optimizer_step_post_hook(post)]
        try:
            train(pair, steps=2)
        finally:
            for handle in handles:
                handle.remove()
    assert seen["mine"] == seen["theirs"] == [("pre", True, {}), ("post", True, {})] * 2


def test_bad_states_are_refused() -> None:
    mine, theirs = both()
    train(theirs, steps=2)
    state = theirs[1].state_dict()
    fewer = FusedAdam(list(mine[0].parameters())[:-1], lr=1e-3)
    with pytest.raises(ValueError, match="one of 5"):
        fewer.load_state_dict(state)
    amsgrad = torch.optim.Adam(theirs[0].parameters(), amsgrad=True)
    train((theirs[0], amsgrad), steps=1)
    with pytest.raises(ValueError, match="amsgrad"):
        mine[1].load_state_dict(amsgrad.state_dict())
    broken = {"state": {0: {"step": torch.tensor(1.0)}}, "param_groups": state["param_groups"]}
    with pytest.raises(ValueError, match="parameter 0's Adam state"):
        mine[1].load_state_dict(broken)
    with pytest.raises(ValueError, match="no parameters"):
        FusedAdam([])


def test_a_training_run_does_not_import_torchdynamo(tmp_path: Path) -> None:
    """The fast preset's whole run (its config resolved, envs, model, an update, a checkpoint)
    in a fresh process: TorchDynamo stays out (importing it took 1.4 s a run)."""
    code = ("import sys; from rlmem.train import main; sys.argv = ['rlmem.train', "
            "'env=DoorKey-5x5', 'memory=lstm', 'agent.preset=fast', 'frames=4096', "
            f"'run_dir={tmp_path / 'run'}', 'progress_bar=false']; main(); "
            "print('dynamo' if 'torch._dynamo' in sys.modules else 'clean')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "clean", done.stdout[-2000:]

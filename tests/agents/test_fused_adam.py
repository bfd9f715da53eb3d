"""Adam's fused kernel (``agent.fused_adam``) against its ``foreach`` steps: the same PPO
updates in float64 (lstm, a screened cell, the windowed transformer), a resumed run
stepping with its own kernels whatever its checkpoint recorded, and the rule that decides
the kernel (off on the bit-exact reference, kept as recorded on resume)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from ppo_minibatch import converted, minibatch_config, rollout_batch

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.config import decided_fused_adam
from rlmem.agents.ppo.update import PPO


def _config(fused: bool) -> Any:
    return minibatch_config(True, fused_adam=fused)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))]
"""Where the kernels are compared: the CPU, and CUDA where torch has it (on the lent GPU
machine: ``benchmarks/cuda_check.sh tests``)."""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("cell", ["lstm", "relstm", "gtrxl"])
def test_fused_steps_equal_the_foreach_steps_in_float64(cell: str, device: str) -> None:
    """Five optimizer steps on one minibatch (so Adam's moments and bias corrections move):
    the weights, the moments and the reported gradient norms agree to rounding."""
    model, batch = rollout_batch(cell)
    batch = converted(batch, device=device)
    runs = []
    for fused in (True, False):
        ppo = PPO(copy.deepcopy(model).to(device), _config(fused))
        group = ppo.optimizer.param_groups[0]
        assert (group["fused"], group["foreach"]) == ((True, None) if fused else (None, True))
        norms = [ppo.step(batch)["ppo/grad_norm"] for _ in range(5)]
        moments = [value for state in ppo.optimizer.state.values()
                   for value in (state["exp_avg"], state["exp_avg_sq"])]
        runs.append((list(ppo.model.parameters()), moments, norms))
    for got, want in zip(*runs, strict=True):
        for mine, theirs in zip(got, want, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-10, atol=1e-13)


def test_a_loaded_optimizer_steps_with_the_runs_kernels() -> None:
    """A checkpoint's optimizer state carries its own kernel choice: after loading, the run's
    ``fused_adam`` decides again."""
    model, batch = rollout_batch("lstm")
    foreach = PPO(copy.deepcopy(model), _config(False))
    foreach.step(batch)
    fused = PPO(copy.deepcopy(model), _config(True))
    fused.load_state_dict(foreach.state_dict())
    group = fused.optimizer.param_groups[0]
    assert (group["fused"], group["foreach"]) == (True, None)
    fused.step(batch)
    back = PPO(copy.deepcopy(model), _config(False))
    back.load_state_dict(fused.state_dict())
    group = back.optimizer.param_groups[0]
    assert (group["fused"], group["foreach"]) == (None, True)


@pytest.mark.parametrize(("agent", "config", "recorded", "fused"), [
    ({"fused_adam": True}, {"vectorization": "sync"}, None, True),  # given: kept
    ({"fused_adam": False}, {}, None, False),
    ({}, {}, {"fused_adam": True}, True),                           # resumed: its own
    ({}, {}, {"preset": "minigrid"}, False),                        # from before the key
    ({}, {"vectorization": "sync"}, None, False),                   # the exact reference
    ({}, {"vectorization": "async"}, None, False),
    ({}, {"vectorization": "auto"}, None, True),
    ({}, {"device": "cuda:0"}, None, True),
    ({}, {}, None, True),
])
def test_fused_adam_is_decided_by_the_run(agent: dict[str, Any], config: dict[str, Any],
                                          recorded: dict[str, Any] | None, fused: bool) -> None:
    assert decided_fused_adam(agent, config, recorded) is fused


def test_a_run_records_its_kernel() -> None:
    default = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5"})
    exact = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5", "vectorization": "sync"})
    assert default["fused_adam"] is True and exact["fused_adam"] is False

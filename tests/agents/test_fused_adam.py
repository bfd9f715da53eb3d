"""Adam's fused kernel (``agent.fused_adam``) against its ``foreach`` steps: the same PPO
updates in float64 (lstm, a screened cell, the windowed transformer), a resumed run
stepping with its own kernels whatever its checkpoint recorded, and the rule that decides
the kernel (on outside the exact reference and CUDA, kept as recorded on resume)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from ppo_minibatch import converted, minibatch_config, rollout_batch

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.config import decided_outside_reference
from rlmem.agents.ppo.update import PPO
from rlmem.cells.screening import RelevancyScreening


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
    ({"fused_adam": True}, {"vectorization": "sync"}, None, True),     # given: kept
    ({"fused_adam": False}, {}, None, False),
    ({}, {}, {"fused_adam": True}, True),                              # resumed: its own
    ({}, {}, {"fused_adam": False}, False),
    ({}, {}, {"preset": "minigrid"}, False),                           # from before the key
    ({}, {}, None, True),                       # left null: on (FUSED_ADAM_MORE_SEEDS.md)
    ({}, {"vectorization": "sync"}, None, False),                      # the exact reference
    ({}, {"device": "cuda"}, None, False),
])
def test_fused_adam_is_decided_by_the_run(agent: dict[str, Any], config: dict[str, Any],
                                          recorded: dict[str, Any] | None, fused: bool) -> None:
    config = {"env": "DoorKey-5x5", **config}
    assert decided_outside_reference("fused_adam", agent, config, recorded,
                                     applies=True) is fused
    assert PPOConfig.decided({"name": "ppo", **agent}, config, recorded)["fused_adam"] is fused


def test_a_run_records_its_kernel() -> None:
    """For every cell: the kernel's check ran relstm, an attentive cell, the hardest case."""
    for memory in ("lstm", "relstm", "gtrxl"):
        config = {"env": "DoorKey-5x5", "memory": {"name": memory}}
        default = PPOConfig.decided({"name": "ppo"}, config)
        exact = PPOConfig.decided({"name": "ppo"}, {**config, "vectorization": "sync"})
        asked = PPOConfig.decided({"name": "ppo", "fused_adam": True},
                                  {**config, "vectorization": "sync"})
        assert (default["fused_adam"], exact["fused_adam"], asked["fused_adam"]) == (True, False,
                                                                                     True)


@pytest.mark.parametrize("fused", [True, False])
def test_acting_after_a_step_reads_the_stepped_weights(fused: bool) -> None:
    """The weights a screened cell derives for acting are kept until a weight changes or an
    optimizer steps (torch's fused kernel does not count its writes on the version counters):
    after a PPO step, acting (no autograd) reads the new weights, not the first ones. Found as
    relstm not learning DoorKey-5x5 with the fused kernel (FUSED_ADAM.md); every cell, outside
    PPO: tests/cells/test_weight_cache.py."""
    model, batch = rollout_batch("relstm")
    ppo = PPO(model, _config(fused))
    cell = model.memory
    assert isinstance(cell, RelevancyScreening)
    with torch.no_grad():
        before = [weight.clone() for weight in _flat(cell.doubled_weights())]
    ppo.step(batch)
    with torch.no_grad():
        kept = _flat(cell.doubled_weights())
    fresh = _flat(cell.doubled_weights())  # under autograd: built anew every call
    for now, built in zip(kept, fresh, strict=True):
        torch.testing.assert_close(now, built.detach(), rtol=0, atol=0)
    assert any(not torch.equal(old, now) for old, now in zip(before, kept, strict=True))


def _flat(weights: Any) -> list[torch.Tensor]:
    """The tensors of ``doubled_weights()``, its Weights tuple unpacked."""
    return [tensor for part in weights for tensor in (part if isinstance(part, tuple) else
                                                      (part,))]

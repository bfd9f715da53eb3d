"""``agent.memory_products``: the memory cell's products as inside
:func:`rlmem.cells.onednn_products`, entered by the PPO model at each call (how a run decides
it: ``test_blocked_linear.py``'s ``test_a_run_decides_it``)."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from rlmem.agents.minigrid_encoders import GRID_VOCABULARY
from rlmem.agents.ppo.model import ActorCritic
from rlmem.cells import cell_config
from rlmem.cells._engines import compiled
from rlmem.envs import EnvOptions


def model(memory_products: bool) -> ActorCritic:
    torch.manual_seed(0)
    envs = EnvOptions().make_vector("DoorKey-5x5", 2, backend="tensor", device="cpu")
    try:
        return ActorCritic(envs.single_observation_space, envs.single_action_space,
                           OmegaConf.structured(cell_config("relstm")),
                           memory_products=memory_products)
    finally:
        envs.close()


def test_the_model_runs_its_cell_inside_the_context() -> None:
    """With the key, relstm's compiled loop sends its step products to oneDNN (at 256 envs a
    step's 256 × 64 → 320 is large enough; the loops count them), forward and backward;
    without it, none; the outputs and gradients within float32 rounding of each other."""
    native = compiled.ops(torch.zeros(1))
    if native is None:
        pytest.skip("no compiled loops")
    plain, fast = model(False), model(True)
    fast.load_state_dict(plain.state_dict())
    observation = {"image": torch.stack([torch.randint(0, size, (5, 256, 7, 7))
                                         for size in GRID_VOCABULARY], -1).to(torch.uint8)}
    resets = torch.zeros(5, 256, dtype=torch.bool)
    resets[2, :3] = True
    results = []
    for each in (plain, fast):
        before = native.onednn_product_count()
        out = each(observation, each.initial_state(256), resets)
        (out.action_params.sum() + out.value.sum()).backward()
        results.append((native.onednn_product_count() - before, out.action_params.detach(),
                        out.value.detach(),
                        [p.grad.clone() for p in each.memory.parameters()
                         if p.grad is not None]))
    assert results[0][0] == 0 and results[1][0] > 0
    for want, got in zip(results[0][1:3], results[1][1:3], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for want, got in zip(results[0][3], results[1][3], strict=True):
        scale = max(want.abs().max().item(), 1e-6)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * scale)


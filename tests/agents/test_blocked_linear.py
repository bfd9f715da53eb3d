"""``agent.blocked_products`` (:mod:`rlmem.agents.blocked_linear`): the model's own products in
the compiled loops' blocked product inside the context, within float32 rounding of
``functional.linear`` (outputs and gradients); ``functional.linear`` bit for bit outside it, in
float64 and where the CPU lacks the loop; the model's heads and folded encoder take it and the
memory cell does not; a run decides it on outside the exact reference."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from omegaconf import OmegaConf
from torch import Tensor
from torch.nn import functional

from rlmem.agents.blocked_linear import MIN_OUTPUTS, Linear, blocked_products, linear
from rlmem.agents.minigrid_encoders import GRID_VOCABULARY
from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.model import ActorCritic
from rlmem.cells import cell_config
from rlmem.cells._engines import compiled
from rlmem.envs import EnvOptions


def needs_the_loop() -> None:
    if compiled.blocked_ops(torch.zeros(1)) is None:
        pytest.skip("the blocked product does not run on this CPU")


def outputs_and_gradients(x: Tensor, weight: Tensor, bias: Tensor,
                          grad: Tensor) -> list[Tensor]:
    inputs = [value.detach().clone().requires_grad_(True) for value in (x, weight, bias)]
    out = linear(*inputs)
    out.backward(grad)
    return [out.detach(), *(value.grad for value in inputs if value.grad is not None)]


@pytest.mark.parametrize("shape", [(256, 64, 64), (3, 5, 7, 17), (1024, 64, 32)])
def test_inside_the_context_within_rounding_of_functional_linear(shape: tuple[int, ...]) -> None:
    needs_the_loop()
    torch.manual_seed(0)
    *batch, inputs, outputs = shape
    x, weight, bias = torch.randn(*batch, inputs), torch.randn(outputs, inputs), torch.randn(
        outputs)
    grad = torch.randn(*batch, outputs)
    reference = outputs_and_gradients(x, weight, bias, grad)
    with blocked_products():
        blocked = outputs_and_gradients(x, weight, bias, grad)
    for name, want, got in zip(("output", "dx", "dW", "db"), reference, blocked, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item(),
                                   msg=name)


@pytest.mark.parametrize("case", ["outside", "float64", "without the loop", "narrow"])
def test_elsewhere_functional_linear_bit_for_bit(case: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(1)
    dtype = torch.float64 if case == "float64" else torch.float32
    outputs = MIN_OUTPUTS - 1 if case == "narrow" else MIN_OUTPUTS
    x, weight, bias = (torch.randn(16, 8, dtype=dtype), torch.randn(outputs, 8, dtype=dtype),
                       torch.randn(outputs, dtype=dtype))
    if case == "without the loop":
        monkeypatch.setattr(compiled, "_blocked_available", lambda native: False)
    with blocked_products(case != "outside"):
        assert torch.equal(linear(x, weight, bias), functional.linear(x, weight, bias))


def model(blocked: bool) -> ActorCritic:
    torch.manual_seed(0)
    envs = EnvOptions().make_vector("DoorKey-5x5", 2, backend="tensor", device="cpu")
    try:
        return ActorCritic(envs.single_observation_space, envs.single_action_space,
                           OmegaConf.structured(cell_config("lstm")), folded_grid=True,
                           blocked_products=blocked)
    finally:
        envs.close()


def test_the_model_takes_it_in_its_heads_and_encoder_not_in_its_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    needs_the_loop()
    plain, blocked = model(False), model(True)
    assert isinstance(blocked.actor[0], Linear)
    assert plain.state_dict().keys() == blocked.state_dict().keys()
    blocked.load_state_dict(plain.state_dict())
    calls: list[tuple[int, ...]] = []
    found = compiled.blocked_ops(torch.zeros(1))
    assert found is not None
    native: Any = found

    class Counting:
        def __getattr__(self, name: str) -> Any:
            if name != "product":
                return getattr(native, name)

            def product(a: Tensor, b: Tensor, add: Tensor | None) -> Tensor:
                calls.append((*a.shape, b.shape[1]))
                return native.product(a, b, add)
            return product

    monkeypatch.setattr(compiled, "blocked_ops", lambda like: Counting()
                        if like.dtype == torch.float32 and like.device.type == "cpu" else None)
    observation = {"image": torch.stack([torch.randint(0, size, (3, 2, 7, 7))
                                         for size in GRID_VOCABULARY], -1).to(torch.uint8)}
    resets = torch.zeros(3, 2, dtype=torch.bool)
    outputs = []
    for each in (plain, blocked):
        out = each(observation, each.initial_state(2), resets)
        (out.action_params.sum() + out.value.sum()).backward()
        outputs.append((out.action_params.detach(), out.value.detach(),
                        [p.grad.clone() for p in each.parameters() if p.grad is not None]))
    # the two heads' hidden layers and the encoder's last convolution (forward, dx, dW each;
    # the window convolution's three inside the compiled loop); not the heads' outputs, 7 and
    # 1 wide (MIN_OUTPUTS), nor the memory
    forward = [(6, 128, 64), (6, 64, 64), (6, 64, 64)]
    assert sorted(calls) == sorted([*forward, (6, 64, 128), (6, 64, 64), (6, 64, 64),
                                    (64, 6, 128), (64, 6, 64), (64, 6, 64)])
    for want, got in zip(outputs[0][:2], outputs[1][:2], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    for want, got in zip(outputs[0][2], outputs[1][2], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("key", "memory"), [("blocked_products", "lstm"),
                                             ("memory_products", "relstm")])
@pytest.mark.parametrize(("agent", "run", "recorded", "taken"), [
    ({}, {}, None, True),                                       # decided on
    ({"<key>": False}, {}, None, False),                        # given: kept
    ({}, {"vectorization": "sync"}, None, False),               # the exact reference
    ({}, {"device": "cuda"}, None, False),
    ({}, {}, {"preset": "fast"}, False),                        # resumed, recorded none
    ({}, {}, {"preset": "fast", "<key>": True}, True),
])
def test_a_run_decides_it(key: str, memory: str, agent: dict[str, Any], run: dict[str, Any],
                          recorded: dict[str, Any] | None, taken: bool) -> None:
    """``agent.blocked_products`` and ``agent.memory_products`` (test_memory_products.py),
    both decided by ``decided_outside_reference`` for every cell."""
    def named(values: dict[str, Any]) -> dict[str, Any]:
        return {key if name == "<key>" else name: value for name, value in values.items()}

    config = {"env": "DoorKey-5x5", "memory": {"name": memory}, **run}
    decided = PPOConfig.decided({"name": "ppo", "preset": "fast", **named(agent)}, config,
                                named(recorded) if recorded is not None else None)
    assert decided[key] is taken

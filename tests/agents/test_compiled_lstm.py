"""``agent.compiled_lstm``: the actor-critic runs its lstm's chunks that a reset cuts through
the compiled loop (:func:`rlmem.cells.compiled_lstm`), the same function, and a run decides and
records the key."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from compiled_chunks import counted_chunks
from ppo_minibatch import rollout_batch, spaces
from reference.equivalence import use_loops

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.config import decided_off
from rlmem.agents.ppo.model import ActorCritic


def test_the_model_with_compiled_chunks_is_the_model_in_float64(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One minibatch with resets inside its chunks: the same outputs and gradients of every
    weight, with the compiled chunk running the memory."""
    use_loops("compiled", monkeypatch)
    model, batch = rollout_batch("lstm")
    ran = counted_chunks(monkeypatch)
    results = []
    for compiled in (False, True):
        model.compiled_lstm = compiled
        model.zero_grad()
        out = model(batch.observations, batch.start_state, batch.resets)
        (out.action_params.sum() + out.value.square().sum()).backward()
        results.append([out.action_params.detach(), out.value.detach(),
                        *(parameter.grad.clone() for parameter in model.parameters()
                          if parameter.grad is not None)])
    assert ran  # the minibatch's chunks are cut by resets, and ran compiled the second time
    for kernel, compiled_chunk in zip(*results, strict=True):
        torch.testing.assert_close(compiled_chunk, kernel, rtol=0, atol=1e-12)


def test_the_actor_critic_takes_it_off_by_default() -> None:
    observation_space, actions = spaces()
    model = ActorCritic(observation_space, actions, {"name": "lstm", "hidden_size": 8})
    assert model.compiled_lstm is False


@pytest.mark.parametrize(("agent", "recorded", "compiled"), [
    ({"compiled_lstm": True}, None, True),            # given: kept
    ({"compiled_lstm": False}, None, False),
    ({}, {"compiled_lstm": True}, True),              # resumed: its own
    ({}, {"preset": "fast"}, False),                  # from before the key
    ({}, None, False),                                # left null: COMPILED_LSTM.md
])
def test_compiled_lstm_is_decided_by_the_run(agent: dict[str, Any],
                                             recorded: dict[str, Any] | None,
                                             compiled: bool) -> None:
    assert decided_off("compiled_lstm", agent, recorded) is compiled


def test_a_run_records_it() -> None:
    default = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5"})
    asked = PPOConfig.decided({"name": "ppo", "compiled_lstm": True}, {"env": "DoorKey-5x5"})
    assert (default["compiled_lstm"], asked["compiled_lstm"]) == (False, True)

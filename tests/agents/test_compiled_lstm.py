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
from rlmem.agents.ppo.config import decided_compiled_lstm
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


LSTM = {"memory": {"name": "lstm"}}


@pytest.mark.parametrize(("agent", "config", "recorded", "compiled"), [
    ({"compiled_lstm": True}, LSTM, None, True),                # given: kept
    ({"compiled_lstm": False}, LSTM, None, False),
    ({}, LSTM, {"compiled_lstm": True}, True),                  # resumed: its own
    ({}, LSTM, {"compiled_lstm": False}, False),
    ({}, LSTM, {"preset": "fast"}, False),                      # from before the key
    ({}, {**LSTM, "vectorization": "sync"}, None, False),       # the exact reference
    ({}, {**LSTM, "device": "cuda"}, None, False),              # torch's kernel runs there
    ({}, {"memory": {"name": "gru"}}, None, False),             # not an lstm
    ({}, LSTM, None, True),                                     # left null: on, by
])                                                              # COMPILED_LSTM_MORE_SEEDS.md
def test_compiled_lstm_is_decided_by_the_run(agent: dict[str, Any], config: dict[str, Any],
                                             recorded: dict[str, Any] | None,
                                             compiled: bool) -> None:
    assert decided_compiled_lstm(agent, config, recorded) is compiled


def test_a_run_records_it() -> None:
    run = {"env": "DoorKey-5x5", **LSTM}
    default = PPOConfig.decided({"name": "ppo"}, run)
    declined = PPOConfig.decided({"name": "ppo", "compiled_lstm": False}, run)
    relstm = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5",
                                                 "memory": {"name": "relstm"}})
    assert (default["compiled_lstm"], declined["compiled_lstm"], relstm["compiled_lstm"]) == (
        True, False, False)

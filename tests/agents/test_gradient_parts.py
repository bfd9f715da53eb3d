"""A minibatch's gradient in parts, one thread each (``agent.update_threads``), against the
one-thread update: equal in float64 for every cell (with resets inside the chunks, advantages
standardised or not), the same bits whichever thread ends first, a non-finite loss stopped
before it is applied, the threads computing with the caller's subnormal-float flag, and the
rule that decides the threads."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
import torch
from ppo_minibatch import converted, minibatch_config, rollout_batch
from torch import Tensor

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.config import decided_update_threads
from rlmem.agents.ppo.gradient_parts import GradientInParts
from rlmem.agents.ppo.loss import ppo_loss
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.rollout import ChunkBatch
from rlmem.agents.ppo.update import PPO
from rlmem.cells import CELLS
from rlmem.cells._engines.gpu import VARIABLE as TRITON_VARIABLE
from rlmem.runs import NonFiniteLossError
from rlmem.runs.arithmetic import flushing_subnormals


def _one_piece(model: ActorCritic, batch: ChunkBatch,
               config: Any) -> tuple[Tensor, dict[str, Any], list[Tensor | None]]:
    model.zero_grad(set_to_none=True)
    loss, stats = ppo_loss(model(batch.observations, batch.start_state, batch.resets), batch,
                           config)
    loss.backward()
    return loss.detach(), stats, [p.grad for p in model.parameters()]


def _in_parts(model: ActorCritic, batch: ChunkBatch, config: Any,
              parts: int) -> tuple[Tensor, dict[str, Any], list[Tensor | None]]:
    model.zero_grad(set_to_none=True)
    in_parts = GradientInParts(model, config, parts)
    try:
        loss, stats = in_parts(batch)
    finally:
        in_parts.close()
    return loss, stats, [p.grad for p in model.parameters()]


@pytest.mark.parametrize(("name", "normalize_advantage"), [
    *((name, False) for name in sorted(CELLS)), ("lstm", True), ("sarnn", True)])
def test_the_gradient_in_parts_is_the_minibatchs_in_float64(name: str,
                                                            normalize_advantage: bool) -> None:
    model, batch = rollout_batch(name)
    assert batch.resets[1:].any(), "the chunks must hold resets"
    config = minibatch_config(normalize_advantage)
    loss, stats, gradients = _one_piece(model, batch, config)
    for parts in (2, 4):
        part_loss, part_stats, part_gradients = _in_parts(model, batch, config, parts)
        torch.testing.assert_close(part_loss, loss, rtol=1e-12, atol=1e-14)
        for key, value in stats.items():
            if key.startswith("memory/"):
                continue  # a cell's diagnostics: the parts' mean (module docstring)
            torch.testing.assert_close(torch.as_tensor(part_stats[key], dtype=torch.float64),
                                       torch.as_tensor(value, dtype=torch.float64),
                                       rtol=1e-10, atol=1e-13, msg=f"{name} {parts}: {key}")
        for (where, _), mine, theirs in zip(model.named_parameters(), part_gradients,
                                            gradients, strict=True):
            assert (mine is None) == (theirs is None), where
            if mine is not None and theirs is not None:
                torch.testing.assert_close(mine, theirs, rtol=1e-10, atol=1e-13,
                                           msg=f"{name} {parts}: {where}")


def test_threads_or_one_thread_the_parts_sum_to_the_same_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    model, batch = rollout_batch("relstm")
    model, batch = copy.deepcopy(model).float(), converted(batch, torch.float32)
    config = minibatch_config(True)
    threaded = [_in_parts(model, batch, config, 2)[2] for _ in range(3)]
    monkeypatch.setenv(TRITON_VARIABLE, "interpret")  # the parts in turn, on this thread
    in_turn = _in_parts(model, batch, config, 2)[2]
    for gradients in [*threaded[1:], in_turn]:
        for mine, theirs in zip(gradients, threaded[0], strict=True):
            assert mine is not None and theirs is not None
            assert torch.equal(mine, theirs)


def test_a_non_finite_part_stops_the_step_before_it_is_applied() -> None:
    model, batch = rollout_batch("lstm")
    model, bad = copy.deepcopy(model).float(), converted(batch, torch.float32)
    ppo = PPO(model, minibatch_config(False, update_threads=2))
    assert ppo.in_parts is not None
    bad.returns[0, -1] = float("nan")  # in the last part only
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(NonFiniteLossError, match="the PPO loss is nan"):
        ppo.step(bad)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))


def test_the_threads_flush_subnormals_as_the_caller_does() -> None:
    model, _ = rollout_batch("gru")
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode that PyTorch can set")
    try:
        in_parts = GradientInParts(model, minibatch_config(False), 2)
        assert in_parts._threads().submit(flushing_subnormals).result() is True
        in_parts.close()
    finally:
        torch.set_flush_denormal(False)
    in_parts = GradientInParts(model, minibatch_config(False), 2)
    assert in_parts._threads().submit(flushing_subnormals).result() is False
    in_parts.close()


@pytest.mark.parametrize(("agent", "config", "recorded", "cores", "threads"), [
    ({"update_threads": 3}, {"vectorization": "sync"}, None, 2, 3),  # given: kept
    ({}, {}, {"update_threads": 2}, 1, 2),                          # resumed: its own
    ({}, {}, {"preset": "minigrid"}, 2, 1),                          # from before the key
    ({}, {"vectorization": "sync"}, None, 2, 1),                     # the exact reference
    ({}, {"vectorization": "async"}, None, 8, 1),
    ({}, {"device": "cuda:0"}, None, 2, 1),
    ({}, {"device": "cpu"}, None, 1, 1),
    ({}, {"device": "auto", "vectorization": "auto"}, None, 2, 2),
    ({}, {}, None, 16, 2),                                           # at most 2
    ({"batch_size": 256}, {}, None, 2, 1),                           # parts too small
    ({"batch_size": 511}, {}, None, 2, 1),
])
def test_update_threads_are_decided_by_the_run(monkeypatch: pytest.MonkeyPatch,
                                               agent: dict[str, Any], config: dict[str, Any],
                                               recorded: dict[str, Any] | None, cores: int,
                                               threads: int) -> None:
    monkeypatch.setattr("rlmem.envs.vectorization.usable_cores", lambda: cores)
    agent = {"batch_size": 512, **agent}
    assert decided_update_threads(agent, config, recorded) == threads


def test_a_run_records_its_update_threads() -> None:
    large = PPOConfig.decided({"name": "ppo", "preset": "fast", "batch_size": 512},
                              {"env": "DoorKey-5x5"})
    minigrid = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5"})
    exact = PPOConfig.decided({"name": "ppo", "preset": "fast", "batch_size": 512},
                              {"env": "DoorKey-5x5", "vectorization": "sync"})
    assert minigrid["update_threads"] == exact["update_threads"] == 1
    assert large["update_threads"] == min(2, len(os.sched_getaffinity(0)))


def test_fewer_than_two_parts_are_refused() -> None:
    model, _ = rollout_batch("gru")
    with pytest.raises(ValueError, match="at least 2 parts"):
        GradientInParts(model, minibatch_config(False), 1)
    with pytest.raises(ValueError, match="update_threads must be at least 1, got 0"):
        PPOConfig(update_threads=0)

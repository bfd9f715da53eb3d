"""Data-parallel PPO (``agent.processes``): two replicas' step on their halves of a minibatch
against one process's step on the whole, in float64 (gradients, clipped norm, weights, losses;
advantages standardised or not, with resets inside the chunks); the replicas' weights equal bit
for bit; a non-finite loss in one replica stops both before it is applied; a failed replica's
words reach the others; and the run end to end, resumed, with the bad input refused.

The replicas here are threads sharing an :class:`~rlmem.agents.ppo.replicas.Exchange` (the same
code as the processes of a run, which the CLI test starts)."""

from __future__ import annotations

import copy
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
import torch
from cli_runner import TINY_PPO, run_cli
from omegaconf import OmegaConf
from ppo_minibatch import CHUNKS, minibatch_config, rollout_batch

from rlmem.agents.ppo.replica_processes import ReplicaProcesses, new_exchange
from rlmem.agents.ppo.replicas import Exchange, ReplicaError, Replicas
from rlmem.agents.ppo.rollout import ChunkBatch
from rlmem.agents.ppo.update import PPO, explained_variance
from rlmem.runs import NonFiniteLossError, load_checkpoint

T = TypeVar("T")


def in_threads(work: Callable[[int, Replicas], T], size: int = 2) -> list[T | BaseException]:
    """``work(rank, replicas)`` for each rank, one thread each, sharing one exchange; what each
    returned or raised."""
    exchange = Exchange.of(size, 100_000, threading.Barrier(size), queue.Queue())

    def one(rank: int) -> T | BaseException:
        try:
            return work(rank, Replicas(exchange, rank, wait_s=60))
        except BaseException as error:  # returned, to be asserted on
            return error

    with ThreadPoolExecutor(size) as pool:
        return list(pool.map(one, range(size)))


def halves(batch: ChunkBatch) -> list[ChunkBatch]:
    """The minibatch's chunks, first half and second."""
    return [batch.select(index) for index in torch.arange(CHUNKS).chunk(2)]


@pytest.mark.parametrize(("name", "normalize_advantage"), [
    ("lstm", False), ("lstm", True), ("relstm", False), ("sarnn", True), ("tarnn", False),
    ("gtrxl", False)])
def test_two_replicas_step_as_one_process_on_their_halves_together(
        name: str, normalize_advantage: bool) -> None:
    model, batch = rollout_batch(name)
    assert batch.resets[1:].any(), "the chunks must hold resets"
    config = minibatch_config(normalize_advantage)
    whole = copy.deepcopy(model)
    stats = PPO(whole, config).step(batch)
    models = [copy.deepcopy(model) for _ in range(2)]

    def step(rank: int, replicas: Replicas) -> dict[str, Any]:
        return PPO(models[rank], config, replicas).step(halves(batch)[rank])

    replica_stats = in_threads(step)
    for result in replica_stats:
        assert isinstance(result, dict), result
    for key in ("loss/policy", "loss/value", "loss/entropy", "loss/total", "ppo/grad_norm"):
        mean = sum(float(result[key]) for result in replica_stats
                   if isinstance(result, dict)) / 2
        assert mean == pytest.approx(float(stats[key]), rel=1e-10, abs=1e-13), key
    for (where, mine), first, second in zip(whole.named_parameters(), models[0].parameters(),
                                            models[1].parameters(), strict=True):
        assert torch.equal(first, second), where  # the replicas stay equal, bit for bit
        assert (first.grad is None) == (mine.grad is None), where
        if mine.grad is not None and first.grad is not None:
            torch.testing.assert_close(first.grad, mine.grad, rtol=1e-10, atol=1e-13,
                                       msg=where)
        torch.testing.assert_close(first, mine, rtol=1e-10, atol=1e-13, msg=where)


def test_a_non_finite_loss_in_one_replica_stops_every_replica_before_it_is_applied() -> None:
    model, batch = rollout_batch("lstm")
    config = minibatch_config(False)
    models = [copy.deepcopy(model) for _ in range(2)]
    parts = halves(batch)
    parts[1].advantages[0, 0] = float("nan")
    before = [p.detach().clone() for p in model.parameters()]

    def step(rank: int, replicas: Replicas) -> dict[str, Any]:
        return PPO(models[rank], config, replicas).step(parts[rank])

    finite_one, failed_one = in_threads(step)
    assert isinstance(failed_one, NonFiniteLossError) and "the PPO loss is nan" in str(failed_one)
    assert isinstance(finite_one, NonFiniteLossError)
    assert "the PPO loss of replica 1 is not finite" in str(finite_one)
    for replica in models:
        for old, new in zip(before, replica.parameters(), strict=True):
            assert torch.equal(old, new)


def test_a_failed_replicas_words_reach_the_others() -> None:
    def work(rank: int, replicas: Replicas) -> None:
        if rank == 1:
            replicas.abandon("replica 1 failed: EnvOutputError: a NaN reward")
            return
        replicas.leader_says(True)

    leader, _ = in_threads(work)
    assert isinstance(leader, ReplicaError)
    assert "replica 1 failed: EnvOutputError: a NaN reward" in str(leader)


def test_the_exchanges_over_replicas_are_those_over_their_values_together() -> None:
    torch.manual_seed(1)
    values = torch.randn(2, 37, dtype=torch.float64)
    targets = values + 0.3 * torch.randn(2, 37, dtype=torch.float64)

    def work(rank: int, replicas: Replicas) -> tuple[Any, ...]:
        return (replicas.mean_and_std(values[rank]),
                explained_variance(targets[rank], values[rank], replicas),
                replicas.episodes([0.5 * rank, 1.0], [3 + rank, 4]),
                replicas.mean_metrics({"a": float(rank), "b": 2.0}),
                replicas.leader_says(rank == 0))

    for result in in_threads(work):
        assert isinstance(result, tuple), result
        (mean, std), explained, episodes, metrics, leader = result
        assert float(mean) == pytest.approx(float(values.mean()), rel=1e-12)
        assert float(std) == pytest.approx(float(values.std()), rel=1e-12)
        assert explained == pytest.approx(explained_variance(targets.flatten(),
                                                             values.flatten()), rel=1e-12)
        assert episodes == ([0.0, 1.0, 0.5, 1.0], [3, 4, 4, 4])
        assert metrics == {"a": 0.5, "b": 2.0}
        assert leader is True


def _second_replica(exchange: Exchange) -> None:
    """Replica 1 of :func:`test_the_exchange_reaches_a_process_of_its_own`, in its process."""
    Replicas(exchange, 1, wait_s=60).gather(torch.tensor([7.0, 8.0]))


def test_the_exchange_reaches_a_process_of_its_own() -> None:
    """The rows go to a replica's process as shared memory, not as a copy."""
    exchange = new_exchange(2, 4)
    with ReplicaProcesses(exchange, _second_replica, [(exchange,)]):
        gathered = Replicas(exchange, 0, wait_s=60).gather(torch.tensor([1.0, 2.0]))
    assert gathered.tolist() == [[1.0, 2.0], [7.0, 8.0]]


def _dying_replica(exchange: Exchange) -> None:
    """A replica whose process ends without a word (as a killed one does)."""
    os._exit(3)


def test_a_replica_process_that_ends_without_a_word_stops_the_leaders_exchange() -> None:
    exchange = new_exchange(2, 4)
    with pytest.raises(ReplicaError, match="replica 1's process ended with exit code 3"), \
            ReplicaProcesses(exchange, _dying_replica, [(exchange,)]):
        Replicas(exchange, 0, wait_s=60).gather(torch.tensor([1.0]))


TINY_PROCESSES = [arg for arg in TINY_PPO if not arg.startswith(
    ("num_envs=", "frames=", "agent.frames_per_env=", "agent.batch_size="))] + [
    "env_backend=tensor", "agent.processes=2", "num_envs=4", "agent.frames_per_env=64",
    "agent.batch_size=32", "frames=2048"]
"""Two processes of two envs each, 256-frame updates of minibatches of 16 frames a replica,
long enough for DoorKey-5x5's episodes (at most 250 steps) to end in both."""


def test_a_run_of_two_processes_trains_resumes_and_counts_both_replicas_episodes(
        tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = run_cli("rlmem.train", *TINY_PROCESSES, f"run_dir={run}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert OmegaConf.load(run / "config.yaml").agent.processes == 2
    rows = (run / "progress.csv").read_text().splitlines()
    header = rows[0].split(",")
    episodes = sum(float(row.split(",")[header.index("episodes")]) for row in rows[1:])
    # 4 envs x 512 steps: each env ends at least two episodes (250 steps at most each)
    assert episodes >= 8 and float(rows[-1].split(",")[0]) == 2048
    assert len(load_checkpoint(run / "checkpoint.pt").extras["recent_returns"]) == episodes
    result = run_cli("rlmem.train", *TINY_PROCESSES[:-1], "frames=2560", f"run_dir={run}",
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert load_checkpoint(run / "checkpoint.pt").count("frames") == 2560


@pytest.mark.parametrize(("override", "message"), [
    ("env_backend=gymnasium", "agent.processes=2 needs the tensor envs"),
    ("num_envs=5", "num_envs=5 does not split between agent.processes=2"),
    ("agent.batch_size=24", "agent.batch_size=24 does not split between agent.processes=2 in "
                            "whole chunks of agent.recurrence=8 frames"),
    ("agent.processes=0", "agent.processes must be at least 1, got 0"),
])
def test_a_run_of_processes_refuses_what_it_cannot_split(override: str, message: str,
                                                         tmp_path: Path) -> None:
    result = run_cli("rlmem.train", *TINY_PROCESSES, override, f"run_dir={tmp_path / 'run'}",
                     cwd=tmp_path)
    assert result.returncode == 1
    assert message in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


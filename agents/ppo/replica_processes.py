"""The other processes of a data-parallel run (``agent.processes``): started by the leader,
``rlmem.train``'s own process, once it has restored the run; watched while it trains; stopped
with it, however it ends.

Each is a fresh interpreter (multiprocessing's ``spawn``: a fork would copy the leader's
threads and locks mid-use) running one replica, :func:`rlmem.agents.ppo.train.replica_main`.
They ignore Ctrl-C, which a terminal sends to every process of its group: the leader alone
turns it into a stop at the next checkpoint, and tells the others at the next exchange
(:meth:`~rlmem.agents.ppo.replicas.Replicas.leader_says`). They write nothing to the run
directory.

A replica that fails says why and breaks the barrier
(:meth:`~rlmem.agents.ppo.replicas.Replicas.abandon`), so the leader's next exchange raises
with its words. One that dies without a word (killed, out of memory) is noticed by a thread of
the leader that watches the processes, which breaks the barrier for it, naming its exit code.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from multiprocessing.context import SpawnProcess
from typing import Any

import torch.multiprocessing

from rlmem.agents.ppo.replicas import LEADER, Exchange

JOIN_S = 30.0
"""How long the leader waits for the others to end after the run, before terminating them."""

WATCH_S = 0.5
"""How often the leader's watch looks at the other processes."""


def new_exchange(replicas: int, width: int) -> Exchange:
    """An :class:`~rlmem.agents.ppo.replicas.Exchange` for ``replicas`` processes: rows in
    shared memory, a barrier and a queue for the replicas' last words."""
    # torch's multiprocessing, so that a tensor in shared memory goes to the other processes as
    # a handle to the same memory, not as a copy.
    context = torch.multiprocessing.get_context("spawn")
    return Exchange.of(replicas, width, context.Barrier(replicas), context.Queue())


class ReplicaProcesses:
    """The replicas but the leader, each in a process of its own, with the leader's watch over
    them. A context manager: leaving it (the run ended, failed or was interrupted) ends them.

    Args:
        exchange: the run's exchange (:func:`new_exchange`).
        target: the replica's function (a module-level one, as ``spawn`` imports it by name).
        arguments: ``target``'s arguments for each rank from 1 on.
    """

    def __init__(self, exchange: Exchange, target: Callable[..., None],
                 arguments: Sequence[tuple[Any, ...]]) -> None:
        context = torch.multiprocessing.get_context("spawn")
        self.exchange = exchange
        self.processes: list[SpawnProcess] = [
            context.Process(target=target, args=args, name=f"rlmem-replica-{rank}",
                            daemon=True)
            for rank, args in enumerate(arguments, start=LEADER + 1)]
        self._ended = threading.Event()
        self._watch = threading.Thread(target=self._watch_them, name="rlmem-replica-watch",
                                       daemon=True)

    def __enter__(self) -> ReplicaProcesses:
        for process in self.processes:
            process.start()
        self._watch.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._ended.set()
        if exc_info[0] is not None:
            # The leader failed or was interrupted: the others must not wait at the barrier.
            self.exchange.barrier.abort()
        for process in self.processes:
            process.join(JOIN_S)
        for process in self.processes:
            if process.is_alive():
                process.terminate()
                process.join(JOIN_S)
        self._watch.join()

    def _watch_them(self) -> None:
        """Break the barrier for a replica whose process ended before the run did, saying
        so."""
        while not self._ended.wait(WATCH_S):
            for rank, process in enumerate(self.processes, start=LEADER + 1):
                if process.exitcode is not None and process.exitcode != 0:
                    self.exchange.last_words.put(
                        f"replica {rank}'s process ended with exit code {process.exitcode}")
                    self.exchange.barrier.abort()
                    return

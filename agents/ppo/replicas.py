r"""Data-parallel PPO on one machine: what the replicas of a run exchange, and how
(``agent.processes``, issue 59).

A run of :math:`P` processes has :math:`P` replicas of the learner. Each holds the same weights
and optimizer state, steps its own :math:`1/P` of the envs (seeded apart) and takes
:math:`1/P` of every minibatch from its own rollout. A minibatch's gradient is the mean of the
replicas' gradients,

.. math::
    \nabla \mathcal L = \frac{1}{P} \sum_{p=1}^{P} \nabla \mathcal L_p ,

exact in real arithmetic: every term of the PPO loss (:mod:`rlmem.agents.ppo.loss`) is a mean
over the minibatch's frames or chunks and every replica's share has as many, and with
``normalize_advantage`` the advantages are standardised by the mean and standard deviation over
all the replicas' frames (:meth:`Replicas.standardise`), as one process standardises its
minibatch. Every replica adds the :math:`P` gradients in the same order, so after the same
Adam step the weights stay equal in every replica, bit for bit. The update's logged means are
the means over the replicas (equal to the whole minibatch's for the means over frames), its
explained variance is computed over every replica's rollout, and the episodes that ended are
gathered, replica by replica, for ``progress.csv`` and ``stop_return``.

The replicas exchange through a buffer in shared memory, a row per replica (:class:`Exchange`),
and a barrier: a replica writes its row, waits for the others and reads every row. Exchanges
alternate between two such sets of rows, so a replica may write its next row while another
still reads this one: the write after that, into the same set, comes after the next wait,
which no replica passes before every one has read. torch.distributed's gloo backend, over the
loopback, took 1.9-2.1 ms per all-reduce of two processes on this project's 2-core machine
whatever its size (1,000 or 54,168 floats), this way 0.15-0.25 ms
(``benchmarks/replica_exchange.py``, ``benchmarks/results/processes.md``): a minibatch step
exchanges once. The rows are float64, so every float32 gradient and every episode length is
held exactly.

A replica that fails breaks the barrier (:meth:`Replicas.abandon`), and every other replica's
next exchange raises :class:`ReplicaError` at once; a replica that dies without a word (killed)
is noticed by the barrier's timeout, or sooner by the leader's watch over its processes
(:mod:`rlmem.agents.ppo.replica_processes`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import torch
from torch import Tensor, nn

from rlmem.runs.errors import RunError

LEADER = 0
"""The replica that logs, saves the checkpoints and decides when the run stops: the process
``rlmem.train`` runs in."""

LAST_WORDS_S = 5.0
"""How long a replica that found the barrier broken waits for the failed one's words."""

WAIT_S = 600.0
"""The longest a replica waits at the barrier for the others: the time between two exchanges
is one minibatch step, or one rollout and the leader's checkpoint, the same work in every
replica; past it a replica is taken to be gone."""


class ReplicaError(RunError):
    """A replica of a data-parallel run failed or stopped answering; the run stopped."""


class Barrier(Protocol):
    """:class:`threading.Barrier` or a :mod:`multiprocessing` one."""

    def wait(self, timeout: float | None = None) -> int: ...

    def abort(self) -> None: ...


class Words(Protocol):
    """:class:`queue.Queue` or a :mod:`multiprocessing` one."""

    def put(self, item: str) -> None: ...

    def get(self, block: bool = True, timeout: float | None = None) -> str: ...


@dataclass(frozen=True)
class Exchange:
    """What the replicas of a run share: ``rows``, two sets of a row per replica
    (``(2, P, width)`` float64, in shared memory between processes), the ``barrier`` of the
    ``P`` replicas, and ``last_words``, where a replica that fails says why before it breaks
    the barrier."""

    rows: Tensor
    barrier: Barrier
    last_words: Words

    @classmethod
    def of(cls, size: int, width: int, barrier: Barrier, last_words: Words) -> Exchange:
        """The exchange of ``size`` replicas, with rows of ``width`` in shared memory."""
        rows = torch.zeros(2, size, width, dtype=torch.float64).share_memory_()
        return cls(rows, barrier, last_words)

    @property
    def size(self) -> int:
        """``P``."""
        return self.rows.shape[1]

    @property
    def width(self) -> int:
        """The most values one exchange carries."""
        return self.rows.shape[2]

    @staticmethod
    def width_for(trainable: Sequence[nn.Parameter], episodes: int, metrics: int = 256) -> int:
        """The row width that holds every exchange of a run: the ``trainable`` weights'
        gradients and the loss, a rollout's episodes (``episodes`` at most, a return and a
        length each, and their count), or the update's metrics."""
        weights = sum(p.numel() for p in trainable)
        return max(weights + 1, 2 * episodes + 1, metrics)


class Replicas:
    """This process's replica, and the exchanges every replica makes together, in the same
    order.

    Args:
        exchange: the run's :class:`Exchange`.
        rank: this replica's row; :data:`LEADER` is ``rlmem.train``'s own process.
        wait_s: :data:`WAIT_S`.
    """

    def __init__(self, exchange: Exchange, rank: int, wait_s: float = WAIT_S) -> None:
        if not 0 <= rank < exchange.size:
            raise ValueError(f"rank {rank} of {exchange.size} replicas")
        self.exchange = exchange
        self.rank = rank
        self.wait_s = wait_s
        self.exchanges = 0
        """Exchanges made so far: they alternate between the two halves of the rows."""

    @property
    def size(self) -> int:
        """``P``."""
        return self.exchange.size

    def gather(self, values: Tensor) -> Tensor:
        """Every replica's ``values`` (a vector, as long in every replica): ``(P, len)``
        float64, row ``p`` replica ``p``'s."""
        return self._exchange(values).clone()

    def total(self, values: Tensor) -> Tensor:
        """The sum of every replica's ``values`` (float64, in replica order, so the same in
        every replica)."""
        return self._exchange(values).sum(0)

    def _exchange(self, values: Tensor) -> Tensor:
        """Every replica's ``values``, as the rows hold them: a view, valid until this
        replica's next exchange but one (when it writes that set of rows again)."""
        flat = values.detach().reshape(-1)
        if flat.numel() > self.exchange.width:
            raise ValueError(f"{flat.numel()} values exceed the exchange's rows of "
                             f"{self.exchange.width}")
        rows = self.exchange.rows[self.exchanges % 2, :, :flat.numel()]
        self.exchanges += 1
        rows[self.rank].copy_(flat)
        self._wait()
        return rows

    def leader_says(self, decision: bool) -> bool:
        """The leader's ``decision`` (every other replica's is ignored)."""
        return bool(self.gather(torch.tensor([float(decision)]))[LEADER, 0])

    def average_gradients(self, parameters: Sequence[nn.Parameter], loss: Tensor) -> Tensor:
        """Replace every parameter's ``grad`` by the mean over the replicas, and return every
        replica's ``loss`` (float64, in replica order). A replica whose loss was not finite
        has no gradient (None: it is sent as zeros); where any replica's was not, the
        gradients are left as they are (every replica then stops before applying them)."""
        local = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
        flat = torch.cat([*(g.reshape(-1) for g in local), loss.detach().reshape(1)])
        gathered = self._exchange(flat)
        losses = gathered[:, -1].clone()
        if not bool(torch.isfinite(losses).all()):
            return losses
        mean = gathered[:, :-1].sum(0).div_(self.size)
        offset = 0
        for parameter in parameters:
            count = parameter.numel()
            parameter.grad = mean[offset:offset + count].view_as(parameter).to(parameter.dtype)
            offset += count
        return losses

    def mean_and_std(self, values: Tensor) -> tuple[Tensor, Tensor]:
        """The mean and the standard deviation (Bessel's correction, as :meth:`Tensor.std`)
        of every replica's ``values`` together, two-pass, in ``values``' dtype."""
        count_sum = self.total(torch.stack([torch.tensor(float(values.numel())),
                                            values.detach().double().sum().cpu()]))
        count = count_sum[0]
        mean = count_sum[1] / count
        squares = self.total((values.detach().double() - mean.to(values.device)).pow(2).sum()
                             .reshape(1).cpu())[0]
        std = (squares / (count - 1)).sqrt()
        return mean.to(values), std.to(values)

    def standardise(self, advantages: Tensor) -> Tensor:
        """``advantages`` standardised by the mean and standard deviation of every replica's
        (as :func:`~rlmem.agents.ppo.loss.loss_advantages` standardises one minibatch)."""
        mean, std = self.mean_and_std(advantages)
        return (advantages - mean) / (std + 1e-8)

    def mean_metrics(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """Each of the update's ``metrics`` averaged over the replicas (the same keys in every
        replica)."""
        names = sorted(metrics)
        means = self.total(torch.tensor([metrics[name] for name in names],
                                        dtype=torch.float64)) / self.size
        return dict(zip(names, means.tolist(), strict=True))

    def episodes(self, returns: Sequence[float],
                 lengths: Sequence[int]) -> tuple[list[float], list[int]]:
        """Every replica's episodes that ended in the update, replica by replica."""
        count = len(returns)
        row = torch.zeros(1 + 2 * self._episodes_room(), dtype=torch.float64)
        row[0] = count
        row[1:1 + count] = torch.tensor(list(returns), dtype=torch.float64)
        row[1 + count:1 + 2 * count] = torch.tensor(list(lengths), dtype=torch.float64)
        gathered = self.gather(row)
        all_returns: list[float] = []
        all_lengths: list[int] = []
        for replica in gathered:
            ended = int(replica[0])
            all_returns += replica[1:1 + ended].tolist()
            all_lengths += [int(length) for length in replica[1 + ended:1 + 2 * ended]]
        return all_returns, all_lengths

    def _episodes_room(self) -> int:
        return (self.exchange.width - 1) // 2

    def abandon(self, why: str) -> None:
        """Say ``why`` this replica stops and break the barrier: every replica waiting, or
        coming to wait, raises :class:`ReplicaError` with these words."""
        self.exchange.last_words.put(why)
        self.exchange.barrier.abort()

    def _wait(self) -> None:
        try:
            self.exchange.barrier.wait(self.wait_s)
        except threading.BrokenBarrierError:
            try:
                why = self.exchange.last_words.get(timeout=LAST_WORDS_S)
            except queue.Empty:
                why = (f"a replica did not reach the next exchange within {self.wait_s:.0f} s, "
                       "or stopped without a word")
            self.exchange.last_words.put(why)  # for the other replicas to read too
            raise ReplicaError(f"the data-parallel run's replicas stopped: {why}.") from None



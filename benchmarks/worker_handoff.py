"""What one hand-off to an env worker process costs on this machine, apart from any env.

    OMP_NUM_THREADS=1 python benchmarks/worker_handoff.py [--round-trips 5000]

The trainer and a worker exchange one small message each way over a
:func:`multiprocessing.Pipe`, as :class:`rlmem.envs.env_workers.EnvWorkers` does per group and
step, with no env stepped: the microseconds per round trip bound what the hand-off alone adds to
``vectorization=async`` (two per step of a 128-step rollout with two groups). The load average
is printed beside it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
import os
import time

WARM_UP = 200
"""Round trips before timing (process start, first page faults)."""


def _echo(connection: multiprocessing.connection.Connection) -> None:
    """The worker: send back every message until None."""
    while (message := connection.recv()) is not None:
        connection.send(message)


def round_trip_us(round_trips: int) -> float:
    """Mean microseconds of one send-and-receive to a worker process."""
    trainer, worker = multiprocessing.Pipe()
    process = multiprocessing.Process(target=_echo, args=(worker,), daemon=True)
    process.start()
    try:
        for _ in range(WARM_UP):
            trainer.send(1)
            trainer.recv()
        start = time.perf_counter()
        for _ in range(round_trips):
            trainer.send(1)
            trainer.recv()
        return (time.perf_counter() - start) / round_trips * 1e6
    finally:
        trainer.send(None)
        process.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=5000)
    args = parser.parse_args()
    before = os.getloadavg()[0]
    microseconds = round_trip_us(args.round_trips)
    print(f"pipe round trip to a worker: {microseconds:.0f} µs "
          f"({args.round_trips} round trips; load average {before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after)")


if __name__ == "__main__":
    main()

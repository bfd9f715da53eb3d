"""``vectorization=auto``: decided by the machine's cores and the number of envs, once."""

from __future__ import annotations

from rlmem.agents.derived import with_derived_values
from rlmem.envs import resolve_vectorization
from rlmem.envs.vectorization import ASYNC_MIN_CORES, ASYNC_MIN_ENVS


def test_auto_steps_in_workers_only_with_cores_and_envs_to_spare() -> None:
    assert resolve_vectorization("auto", ASYNC_MIN_ENVS, ASYNC_MIN_CORES) == "async"
    assert resolve_vectorization("auto", ASYNC_MIN_ENVS, ASYNC_MIN_CORES - 1) == "sync"
    assert resolve_vectorization("auto", ASYNC_MIN_ENVS - 1, 64) == "sync"
    assert resolve_vectorization("sync", 64, 64) == "sync"
    assert resolve_vectorization("async", 2, 1) == "async"


def test_a_run_records_the_decision_and_an_old_run_stepped_in_sync() -> None:
    decided = with_derived_values({"env": "DoorKey-5x5", "mission": False, "num_envs": 16,
                                   "vectorization": "auto"})
    assert decided["vectorization"] in ("sync", "async")
    assert with_derived_values(decided) == decided
    old = with_derived_values({"env": "DoorKey-5x5", "mission": False, "num_envs": 16})
    assert old["vectorization"] == "sync"

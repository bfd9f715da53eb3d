"""Envs stepped in worker processes, in groups, so that stepping overlaps with the policy's work.

:class:`EnvWorkers` holds ``num_envs`` copies of an env in ``workers`` processes. The envs form
``groups`` contiguous groups, and every worker holds a share of every group, so that stepping
one group keeps every worker busy. A trainer acts for one group while the workers step the
other (Sample Factory's double-buffered sampling, EnvPool's async mode)::

    workers.step_async(0, actions_0)       # the workers step group 0 ...
    actions_1 = policy(observation_1)      # ... while the policy acts for group 1
    observation_0, ... = workers.step_wait(0, "frame 32")

Observations, final observations, rewards and the done flags live in shared memory
(:func:`gymnasium.vector.utils.create_shared_memory`): a step sends one small message per worker
and pickles no array. The arrays :meth:`step_wait` returns are views of that memory, valid until
the group is stepped again; a caller keeps what it needs by copying.

Each env auto-resets in the same step as gymnasium's ``SAME_STEP`` mode: a step that ends an
episode returns the next episode's first observation, and the last one is in
:meth:`final_observations`. :meth:`reset` seeds env ``i`` with ``seed + i``, as
:class:`gymnasium.vector.SyncVectorEnv` does.

A worker whose env raises, or whose env returns an observation that does not fit its space,
reports the env's index and its step, and :meth:`step_wait` raises :class:`EnvWorkerError`; a
worker that dies (killed, out of memory, a crash in native code) is noticed within a poll
interval and reported the same way. Either way every worker is stopped.

Why not :class:`gymnasium.vector.AsyncVectorEnv`: it steps all its envs at once (one process per
env) and has no groups, so a policy cannot act for some envs while the others step.
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.connection
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import (
    CloudpickleWrapper,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from rlmem.envs.spaces import Observation

POLL_SECONDS = 0.5
"""How often a wait checks that the workers it waits for are alive."""


class EnvWorkerError(RuntimeError):
    """An env raised in its worker process, returned an observation that does not fit its
    space, or its worker process died."""


@dataclass(frozen=True)
class StepResult:
    """One step of a group, as views of the shared memory (valid until the group steps again).

    Shapes (``G`` envs in the group):
        - observation: each field ``(G, *field shape)``
        - reward: ``(G,)`` float64; terminated, truncated: ``(G,)`` bool
    """

    observation: Observation
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray


def _share(workers: int, groups: int, num_envs: int) -> list[list[list[int]]]:
    """``share[w][g]``: the envs of group ``g`` that worker ``w`` steps (contiguous groups, each
    split as evenly as it goes over the workers)."""
    bounds = np.linspace(0, num_envs, groups + 1).round().astype(int)
    share: list[list[list[int]]] = [[] for _ in range(workers)]
    for start, stop in itertools.pairwise(bounds):
        for worker, part in enumerate(np.array_split(np.arange(start, stop), workers)):
            share[worker].append([int(env) for env in part])
    return share


def _misfit(space: spaces.Space[Any], observation: Any) -> str:
    """How ``observation`` misses the shape of a Box ``space`` (or a Dict's Box fields): a
    phrase, or "" when it fits (what the shared memory's copy would fail on)."""
    fields = space.spaces.items() if isinstance(space, spaces.Dict) else [(None, space)]
    for key, field in fields:
        value: Any = observation if key is None else (
            observation.get(key) if isinstance(observation, dict) else None)
        if isinstance(field, spaces.Box) and np.shape(value) != field.shape:
            where = "" if key is None else f" (field {key!r})"
            return (f"returned an observation{where} of shape {list(np.shape(value))} where its "
                    f"space has shape {list(field.shape)}")
    return ""


def _shared_arrays(memory: dict[str, Any], action_space: spaces.Space[Any], num_envs: int
                   ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
    """A worker's views of the shared memory it reads and writes in place: every env's
    actions, rewards, terminations and truncations."""
    actions = read_from_shared_memory(action_space, memory["actions"], num_envs)
    reward, terminated, truncated = (np.frombuffer(memory[key].get_obj(), dtype=dtype)
                                     for key, dtype in (("reward", np.float64),
                                                        ("terminated", np.bool_),
                                                        ("truncated", np.bool_)))
    return actions, reward, terminated, truncated


def _work(pipe: multiprocessing.connection.Connection,
          parent_pipe: multiprocessing.connection.Connection, env_fns: CloudpickleWrapper,
          share: list[list[int]], memory: dict[str, Any], observation_space: spaces.Space[Any],
          action_space: spaces.Space[Any], num_envs: int) -> None:
    """A worker's loop: make its envs, then serve ``reset``, ``step`` and ``close`` requests.

    Replies ``("ok", None)``, or ``("error", (env, step, group, message))`` and stops (group:
    the one it was stepping, None in a reset)."""
    parent_pipe.close()
    mine = sorted(env for group in share for env in group)
    envs: dict[int, gym.Env] = {}
    steps = dict.fromkeys(mine, 0)
    current = -1
    group: int | None = None
    try:
        for current in mine:
            envs[current] = env_fns.fn[current]()  # type: ignore[index]
        actions, reward, terminated, truncated = _shared_arrays(memory, action_space, num_envs)

        def write(key: str, env: int, observation: Any) -> None:
            if misfit := _misfit(observation_space, observation):
                raise EnvWorkerError(misfit)
            write_to_shared_memory(observation_space, env, observation, memory[key])

        while True:
            command, argument = pipe.recv()
            group = argument if command == "step" else None
            if command == "close":
                break
            if command == "reset":
                for current in mine:
                    seed = None if argument is None else argument + current
                    write("observation", current, envs[current].reset(seed=seed)[0])
                    steps[current] = 0
            else:  # "step"
                for current in share[argument]:
                    env = envs[current]
                    steps[current] += 1
                    observation, rew, term, trunc, _ = env.step(actions[current])
                    rew = float(rew)
                    if term or trunc:
                        write("final_observation", current, observation)
                        observation, _ = env.reset()
                    write("observation", current, observation)
                    reward[current], terminated[current], truncated[current] = rew, term, trunc
            pipe.send(("ok", None))
    except (KeyboardInterrupt, EOFError):
        pass
    except Exception as error:  # reported to the trainer, which names the env and the step
        detail = (str(error) if isinstance(error, EnvWorkerError)
                  else f"raised {type(error).__name__}: {error}\n"
                       f"{''.join(traceback.format_exc(limit=-3))}")
        pipe.send(("error", (current, steps.get(current, 0), group, detail)))
    finally:
        for env in envs.values():
            env.close()
        pipe.close()


class EnvWorkers:
    """``len(env_fns)`` envs in ``workers`` processes, stepped in ``groups`` groups (module
    docstring).

    Args:
        env_fns: one constructor per env (cloudpickled, so closures work whatever the start
            method).
        name: the env as the run names it, for the messages.
        workers: worker processes (at most one per env of the smallest group).
        groups: contiguous groups of envs that step independently; 2 lets one group step while
            the policy acts for the other.
        context: the multiprocessing start method (default: ``fork`` where there is one, which
            starts a worker in milliseconds; else ``spawn``).

    Raises:
        ValueError: fewer envs than groups, or fewer than one worker.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], name: str, *, workers: int,
                 groups: int = 2, context: str | None = None) -> None:
        num_envs = len(env_fns)
        if groups < 1 or num_envs < groups:
            raise ValueError(f"{num_envs} envs cannot form {groups} groups")
        if workers < 1:
            raise ValueError(f"workers must be positive, got {workers}")
        self.name = name
        self.num_envs = num_envs
        self.workers = min(workers, num_envs // groups)
        bounds = np.linspace(0, num_envs, groups + 1).round().astype(int)
        self.groups = [slice(int(start), int(stop))
                       for start, stop in itertools.pairwise(bounds)]
        probe = env_fns[0]()
        try:
            self.single_observation_space = probe.observation_space
            self.single_action_space = probe.action_space
            self.spec = probe.spec
        finally:
            probe.close()
        methods = multiprocessing.get_all_start_methods()
        ctx: Any = multiprocessing.get_context(
            context or ("fork" if "fork" in methods else "spawn"))
        space = self.single_observation_space
        self._memory: dict[str, Any] = {
            "observation": create_shared_memory(space, num_envs, ctx),
            "final_observation": create_shared_memory(space, num_envs, ctx),
            "actions": create_shared_memory(self.single_action_space, num_envs, ctx),
            "reward": ctx.Array("d", num_envs), "terminated": ctx.Array("b", num_envs),
            "truncated": ctx.Array("b", num_envs)}
        self._observation: Any = read_from_shared_memory(space, self._memory["observation"],
                                                         num_envs)
        self._final: Any = read_from_shared_memory(space, self._memory["final_observation"],
                                              num_envs)
        self._actions: Any = read_from_shared_memory(self.single_action_space,
                                                self._memory["actions"], num_envs)
        self._reward, self._terminated, self._truncated = (
            np.frombuffer(self._memory[key].get_obj(), dtype=dtype)
            for key, dtype in (("reward", np.float64), ("terminated", np.bool_),
                               ("truncated", np.bool_)))
        share = _share(self.workers, groups, num_envs)
        self._share = share
        self._pipes: list[multiprocessing.connection.Connection] = []
        self._processes: list[Any] = []
        self._busy: set[int] = set()
        self._labels: dict[int | None, str] = {}
        """The ``at`` of each group's step in flight, for the messages."""
        self.closed = False
        # Cloudpickled, so closures reach a spawned worker too; it holds a list here.
        wrapped = CloudpickleWrapper(list(env_fns))  # type: ignore[arg-type]
        for worker in range(self.workers):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_work, name=f"rlmem-env-worker-{worker}", daemon=True,
                args=(child, parent, wrapped, share[worker], self._memory, space,
                      self.single_action_space, num_envs))
            process.start()
            child.close()
            self._pipes.append(parent)
            self._processes.append(process)

    # --- the protocol -----------------------------------------------------------------------

    def reset(self, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """Reset every env (env ``i`` with ``seed + i``); the first observations (views of the
        shared memory) and an empty info, as a vector env's ``reset`` returns them."""
        for pipe in self._pipes:
            pipe.send(("reset", seed))
        self._wait(range(self.workers), "the first reset")
        return self._observation, {}

    def step_async(self, group: int, actions: np.ndarray, at: str) -> None:
        """Start stepping group ``group`` with ``actions`` (one per env of the group); ``at``
        names the step in messages.

        Raises:
            EnvWorkerError: a worker of the group has stopped (its env failed at an earlier
                step of the other group, or it died); every worker has been stopped.
        """
        self._write_actions(self.groups[group], actions)
        self._labels[group] = at
        for worker, pipe in enumerate(self._pipes):
            if self._share[worker][group]:
                try:
                    pipe.send(("step", group))
                except OSError:  # it stopped: its last reply, or its exit code, says why
                    self._wait([worker], at)
                    self._fail(f"the worker process of envs {self._envs_of(worker)} stopped "
                               f"before {at}")
                self._busy.add(worker)

    def step_wait(self, group: int, at: str) -> StepResult:
        """Wait for group ``group``'s step; ``at`` names it in messages (``frame 96``).

        Raises:
            EnvWorkerError: an env raised or misfit its space, or a worker died; every worker
                has been stopped.
        """
        self._wait([worker for worker in range(self.workers) if self._share[worker][group]], at)
        part = self.groups[group]
        return StepResult(_rows(self._observation, part), self._reward[part],
                          self._terminated[part], self._truncated[part])

    def final_observations(self, envs: np.ndarray) -> Observation:
        """Copies of the last observations of the episodes that envs ``envs`` (global
        indices) ended at their last step."""
        return _rows(self._final, envs, copy=True)

    def close(self) -> None:
        """Stop every worker (those that do not stop in a second are terminated)."""
        if self.closed:
            return
        self.closed = True
        for worker, pipe in enumerate(self._pipes):
            try:
                if worker in self._busy:
                    pipe.poll(1.0) and pipe.recv()
                pipe.send(("close", None))
            except (OSError, EOFError, BrokenPipeError):
                pass
        for process in self._processes:
            process.join(1.0)
            if process.is_alive():
                process.terminate()
                process.join()
        for pipe in self._pipes:
            pipe.close()

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self.close()

    # --- helpers ----------------------------------------------------------------------------

    def _write_actions(self, part: slice, actions: np.ndarray) -> None:
        if isinstance(self._actions, np.ndarray):
            self._actions[part] = actions
        else:  # a Dict or Tuple action space: field by field
            for index, action in zip(range(part.start, part.stop), actions, strict=True):
                write_to_shared_memory(self.single_action_space, index, action,
                                       self._memory["actions"])

    def _wait(self, workers: Sequence[int] | range, at: str) -> None:
        for worker in workers:
            pipe, process = self._pipes[worker], self._processes[worker]
            while not pipe.poll(POLL_SECONDS):
                if not process.is_alive():
                    self._fail(f"the worker process of envs {self._envs_of(worker)} died (exit "
                               f"code {process.exitcode}) while stepping them, at {at}")
            try:
                status, detail = pipe.recv()
            except (EOFError, OSError):
                process.join(1.0)
                self._fail(f"the worker process of envs {self._envs_of(worker)} died (exit "
                           f"code {process.exitcode}) while stepping them, at {at}")
            self._busy.discard(worker)
            if status == "error":
                env, step, group, message = detail
                self._fail(f"env {self.name} (env {env} of {self.num_envs}, at its step {step}; "
                           f"the run's {self._labels.get(group, at)}) {message}")

    def _envs_of(self, worker: int) -> str:
        envs = sorted(env for group in self._share[worker] for env in group)
        return f"{envs[0]}-{envs[-1]} of {self.num_envs}" if len(envs) > 1 else str(envs[0])

    def _fail(self, message: str) -> None:
        self.close()
        raise EnvWorkerError(message)


def _rows(observation: Any, index: slice | np.ndarray, copy: bool = False) -> Any:
    """Rows ``index`` of every field of a batch of observations (views for a slice)."""
    if isinstance(observation, dict):
        return {key: _rows(value, index, copy) for key, value in observation.items()}
    rows = observation[index]
    return np.array(rows) if copy else rows

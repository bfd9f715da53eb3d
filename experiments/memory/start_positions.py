"""Success on MiniGrid's memory task by the agent's start position: why agents trained on
MemoryS7 fail zero-shot on MemoryS13 (issue 9).

    OMP_NUM_THREADS=1 nice -n 15 python -m experiments.memory.start_positions \
        --runs /work/exp/experiments/memory/runs/MemoryS7/{relstm,lstm}/seed{0,1,2}

``MemoryEnv._gen_grid`` (minigrid) puts the agent facing east at ``x`` in
``[1, hallway_end]`` on the middle row, ``hallway_end = size - 3``: ``[1, 4]`` on MemoryS7,
``[1, 10]`` on MemoryS13. The cue (a key or a ball) lies at ``(1, size // 2 - 1)`` in the start
room; the corridor ends in a fork at ``x = hallway_end + 1`` holding a key and a ball. Each run
is played as ``python -m rlmem.evaluate`` plays it (its loader, sampled actions, the same env
and action seeds, 16 envs with fixed quotas), on MemoryS7 and on MemoryS13, and every episode
is recorded: where the agent started, the cue, how the episode ended (success, the wrong
object, or the step limit), and what the agent saw (the cue, the fork's objects) and when.
The tables go to ``S13_BY_START.md`` beside this script. Nothing is written into the run
directories.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import VectorEnv
from minigrid.envs.memory import MemoryEnv

from experiments.common.evaluations import suite_evaluation
from rlmem.agents.policy_evaluation import Actor, episode_quotas, evaluate_policy
from rlmem.agents.registry import AGENTS
from rlmem.envs import EnvOptions, make_vector_env
from rlmem.evaluate import check_interface, load_run, short_name
from rlmem.runs import resolve_device

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "S13_BY_START.md"
ENVS = ("MemoryS7", "MemoryS13")
"""The training env (the in-distribution baseline) and the zero-shot target."""
EPISODES = 200
"""Episodes per run and env, as the memory suite evaluates."""
NUM_ENVS = 16
"""Envs played in parallel, as ``python -m rlmem.evaluate`` plays them."""


class Outcome(enum.Enum):
    """How an episode of MemoryEnv ends."""

    SUCCESS = "success"
    """At the object matching the cue (the only positive reward)."""
    WRONG_OBJECT = "wrong object"
    """At the other object: terminated without reward."""
    TIMEOUT = "timeout"
    """Truncated at ``max_steps`` (``5 * size**2``) without reaching either object."""


OTHER = {"key": "ball", "ball": "key"}
"""MemoryEnv's two object types, each to the other."""


@dataclass(frozen=True)
class EpisodeRecord:
    """One finished episode of MemoryEnv."""

    start_x: int
    start_y: int
    cue: str
    """The type of the start room's object: ``key`` or ``ball``."""
    episode_return: float
    length: int
    outcome: Outcome
    cue_seen_at_start: bool
    """The cue is in the first observation."""
    fork_seen_at_start: bool
    """An object of the fork is in the first observation."""
    cue_first_seen: int | None
    """The first step (0: the first observation) whose observation showed the cue; None if
    none did."""
    cue_last_seen: int | None
    """The last step whose observation showed the cue; None if none did."""
    steps_to_fork: int | None
    """The step at which the agent first stood in the fork's column (``x = hallway_end + 1``:
    one step from either object, where the choice is made); None if it never did."""

    @property
    def success(self) -> bool:
        """A positive return, as :class:`~rlmem.agents.policy_evaluation.EvaluationResult`
        counts success."""
        return self.episode_return > 0

    @property
    def chosen(self) -> str | None:
        """The type of the object the episode ended at (None after a timeout): the cue's
        after a success, the other type (``key`` or ``ball``) after a wrong choice."""
        if self.outcome is Outcome.TIMEOUT:
            return None
        return self.cue if self.success else OTHER[self.cue]

    @property
    def cue_seen(self) -> bool:
        return self.cue_first_seen is not None

    @property
    def reached_fork(self) -> bool:
        return self.steps_to_fork is not None

    @property
    def cue_seen_before_fork(self) -> bool:
        """The cue was seen before the agent first reached the fork's column."""
        return self.cue_first_seen is not None and (
            self.steps_to_fork is None or self.cue_first_seen < self.steps_to_fork)

    @property
    def cue_seen_from_fork(self) -> bool:
        """The cue was seen once the agent had reached the fork's column: it looked back (on
        MemoryS7 the cue is 4 cells from the fork, in view through the start room's door)."""
        return (self.cue_last_seen is not None and self.steps_to_fork is not None
                and self.cue_last_seen >= self.steps_to_fork)

    @property
    def delay(self) -> int | None:
        """Steps from the last sight of the cue to the choice (the episode's last step, at an
        object): what the memory must span. None after a timeout or if the cue was never
        seen."""
        if self.cue_last_seen is None or self.outcome is Outcome.TIMEOUT:
            return None
        return self.length - self.cue_last_seen


@dataclass
class _Progress:
    """What is known of the episode under way."""

    start: tuple[int, int]
    cue: str
    cue_seen_at_start: bool
    fork_seen_at_start: bool
    cue_first_seen: int | None
    cue_last_seen: int | None
    steps_to_fork: int | None = None
    episode_return: float = 0.0
    length: int = 0


class MemoryEpisodeLog(gym.Wrapper):
    """Record every finished episode of a MemoryEnv (possibly wrapped) as an
    :class:`EpisodeRecord`, in the order they finish; acting is unchanged and no random number
    is drawn, so the episodes are those an unwrapped env would play.

    Raises:
        TypeError: ``env`` is not a MemoryEnv.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        unwrapped = env.unwrapped
        if not isinstance(unwrapped, MemoryEnv):
            raise TypeError(f"{env} is not MiniGrid's MemoryEnv")
        self.memory = unwrapped
        self.episodes: list[EpisodeRecord] = []
        self._progress: _Progress | None = None

    @property
    def _cue_position(self) -> tuple[int, int]:
        return 1, self.memory.height // 2 - 1

    @property
    def _fork_x(self) -> int:
        # success_pos is beside one of the fork's objects, in the fork's column.
        return int(self.memory.success_pos[0])

    def _sees_cue(self) -> bool:
        return bool(self.memory.agent_sees(*self._cue_position))

    def _sees_fork(self) -> bool:
        middle = self.memory.height // 2
        return any(self.memory.agent_sees(self._fork_x, middle + offset) for offset in (-2, 2))

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        cue = self.memory.grid.get(*self._cue_position)
        assert cue is not None  # _gen_grid always places the cue there
        seen = self._sees_cue()
        x, y = (int(value) for value in self.memory.agent_pos)
        first = 0 if seen else None
        self._progress = _Progress((x, y), cue.type, seen, self._sees_fork(), first, first)
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        progress = self._progress
        if progress is None:
            raise RuntimeError("step before reset")
        progress.episode_return += float(reward)
        progress.length += 1
        if progress.steps_to_fork is None and int(self.memory.agent_pos[0]) == self._fork_x:
            progress.steps_to_fork = progress.length
        if self._sees_cue():
            if progress.cue_first_seen is None:
                progress.cue_first_seen = progress.length
            progress.cue_last_seen = progress.length
        if terminated or truncated:
            self.episodes.append(self._finish(progress, terminated))
            self._progress = None
        return observation, reward, terminated, truncated, info

    def _finish(self, progress: _Progress, terminated: bool) -> EpisodeRecord:
        position = tuple(int(value) for value in self.memory.agent_pos)
        if not terminated:
            outcome = Outcome.TIMEOUT
        elif position == tuple(self.memory.success_pos):
            outcome = Outcome.SUCCESS
        elif position == tuple(self.memory.failure_pos):
            outcome = Outcome.WRONG_OBJECT
        else:
            raise RuntimeError(f"MemoryEnv terminated at {position}, beside neither object")
        return EpisodeRecord(
            *progress.start, progress.cue, progress.episode_return, progress.length, outcome,
            progress.cue_seen_at_start, progress.fork_seen_at_start, progress.cue_first_seen,
            progress.cue_last_seen, progress.steps_to_fork)


def evaluation_seed(seed: int) -> int:
    """The seed of the envs' first reset and of torch's sampling for evaluation seed ``seed``,
    as :func:`rlmem.evaluate.evaluate_run` derives it."""
    return int(np.random.SeedSequence([seed]).generate_state(1)[0])


def play(actor: Actor[Any], name: str, make_env: Callable[[], gym.Env], episodes: int,
         num_envs: int, seed: int) -> list[EpisodeRecord]:
    """Play ``episodes`` episodes of MemoryEnv ``name`` (each env made by ``make_env``) with
    ``actor`` (sampled actions) as
    :func:`~rlmem.agents.policy_evaluation.evaluate_policy` plays them, and return the
    episodes it counts: the first ``quota`` to finish in each env, env by env.

    Raises:
        RuntimeError: the records disagree with the returns evaluation counted.
    """
    num_envs = min(num_envs, episodes)
    quotas = episode_quotas(episodes, num_envs)
    logs: dict[int, MemoryEpisodeLog] = {}

    def logged(index: int) -> gym.Env:
        logs[index] = MemoryEpisodeLog(make_env())
        return logs[index]

    envs: VectorEnv = make_vector_env(
        name, num_envs, env_fns=[functools.partial(logged, index) for index in range(num_envs)])
    torch.manual_seed(seed)
    try:
        _, returns = evaluate_policy(actor, envs, episodes, greedy=False, seed=seed,
                                     quotas=quotas)
    finally:
        envs.close()
    records = [record for index, quota in enumerate(quotas)
               for record in logs[index].episodes[:quota]]
    if not np.allclose(sorted(record.episode_return for record in records), sorted(returns)):
        raise RuntimeError("the recorded episodes are not those evaluation counted")
    return records


@dataclass(frozen=True)
class RunEvaluation:
    """The episodes of one run on one env."""

    label: str
    """``<cell>/seed<k>``: the run directory's last two parts."""
    env: str
    frames: int
    records: list[EpisodeRecord]


@dataclass(frozen=True)
class LoadedRun:
    """A trained run, loaded as ``python -m rlmem.evaluate`` loads it, ready to play ``env``."""

    actor: Actor[Any]
    env: str
    """The env's short name."""
    make_env: Callable[[], gym.Env]
    """The env as the run's recorded options build it."""
    frames: int
    """Frames the run was trained for."""


def stored_eval_memory(run: Path, env: str) -> dict[str, Any]:
    """The ``eval_memory`` of the run's stored evaluation on ``env`` (the suites give MemLSTM
    the capacity of the longest episode there), or ``{}`` when it has none."""
    report = suite_evaluation(run, env)
    return dict(report.get("eval_memory") or {}) if report is not None else {}


def load_for(run: Path, env: str) -> LoadedRun:
    """Load ``run`` as ``python -m rlmem.evaluate`` does, checked against ``env``, with the
    ``eval_memory`` of its stored evaluation there."""
    checkpoint = load_run(run)
    config = checkpoint.config
    name = short_name(env)
    options = EnvOptions.from_config(config)
    probe = check_interface(run, name, config, options)
    load_actor = AGENTS[config["agent"]["name"]].load_actor
    actor = load_actor(run, checkpoint, probe.observation_space, probe.action_space,
                       resolve_device("cpu"), stored_eval_memory(run, name))
    return LoadedRun(actor, name, functools.partial(options.make, name),
                     checkpoint.count("frames"))


def evaluate_run_by_start(run: Path, env: str, episodes: int, num_envs: int,
                          seed: int) -> RunEvaluation:
    """Load ``run`` as ``python -m rlmem.evaluate`` does and play it on ``env``."""
    loaded = load_for(run, env)
    records = play(loaded.actor, loaded.env, loaded.make_env, episodes, num_envs,
                   evaluation_seed(seed))
    return RunEvaluation(f"{run.parent.name}/{run.name}", loaded.env, loaded.frames, records)


# --- tables ---------------------------------------------------------------------------------

Group = Callable[[EpisodeRecord], int | None]
"""The key an episode is tabulated under (None: left out)."""

DELAYS = ((1, 3), (4, 6), (7, 9), (10, 14), (15, 24), (25, None))
"""Buckets of :attr:`EpisodeRecord.delay` (inclusive; None: no upper bound)."""


def delay_bucket(record: EpisodeRecord) -> int | None:
    """The index in :data:`DELAYS` of the episode's delay; None if it has none."""
    delay = record.delay
    if delay is None:
        return None
    return next(index for index, (low, high) in enumerate(DELAYS)
                if low <= delay and (high is None or delay <= high))


def percent(records: Sequence[EpisodeRecord], flag: Callable[[EpisodeRecord], bool]) -> str:
    """The share of ``records`` for which ``flag`` holds, or a dash when there are none."""
    return f"{sum(map(flag, records)) / len(records):.0%}" if records else "—"


def succeeded(record: EpisodeRecord) -> bool:
    return record.success


def timed_out(record: EpisodeRecord) -> bool:
    return record.outcome is Outcome.TIMEOUT


def success_cell(records: Sequence[EpisodeRecord],
                 flag: Callable[[EpisodeRecord], bool] = succeeded) -> str:
    """``share% (episodes)`` of the records for which ``flag`` (default: success) holds, or
    blank when there are none."""
    return f"{percent(records, flag)} ({len(records)})" if records else ""


def grouped(records: Iterable[EpisodeRecord], key: Group) -> dict[int, list[EpisodeRecord]]:
    """The records with a key, grouped by it, in increasing key."""
    groups: dict[int, list[EpisodeRecord]] = {}
    for record in records:
        value = key(record)
        if value is not None:
            groups.setdefault(value, []).append(record)
    return dict(sorted(groups.items()))


def start_x(record: EpisodeRecord) -> int:
    return record.start_x


def chose_key_given(cue: str) -> Callable[[Sequence[EpisodeRecord]], str]:
    """The share of episodes with this cue, ended at an object, that ended at the key: equal
    for both cues when the choice ignores the cue."""
    def share(records: Sequence[EpisodeRecord]) -> str:
        chosen = [r for r in records if r.cue == cue and r.chosen is not None]
        return percent(chosen, lambda r: r.chosen == "key")
    return share


def median(values: Sequence[int | None]) -> str:
    present = [value for value in values if value is not None]
    return f"{np.median(present):.0f}" if present else "—"


DETAIL_COLUMNS: tuple[tuple[str, Callable[[Sequence[EpisodeRecord]], str]], ...] = (
    ("episodes", lambda rs: str(len(rs))),
    ("success", lambda rs: percent(rs, succeeded)),
    ("wrong object", lambda rs: percent(rs, lambda r: r.outcome is Outcome.WRONG_OBJECT)),
    ("timeout", lambda rs: percent(rs, timed_out)),
    ("cue in view at start", lambda rs: percent(rs, lambda r: r.cue_seen_at_start)),
    ("fork in view at start", lambda rs: percent(rs, lambda r: r.fork_seen_at_start)),
    ("saw cue", lambda rs: percent(rs, lambda r: r.cue_seen)),
    ("saw cue before fork", lambda rs: percent(rs, lambda r: r.cue_seen_before_fork)),
    ("saw cue from fork", lambda rs: percent(rs, lambda r: r.cue_seen_from_fork)),
    ("reached fork", lambda rs: percent(rs, lambda r: r.reached_fork)),
    ("success if cue seen", lambda rs: success_cell([r for r in rs if r.cue_seen]) or "—"),
    ("success if not", lambda rs: success_cell([r for r in rs if not r.cue_seen]) or "—"),
    ("chose key if cue key", chose_key_given("key")),
    ("chose key if cue ball", chose_key_given("ball")),
    ("median steps to fork", lambda rs: median([r.steps_to_fork for r in rs])),
    ("median delay", lambda rs: median([r.delay for r in rs])),
    ("mean length", lambda rs: f"{np.mean([r.length for r in rs]):.0f}"),
)
"""The per-run table's columns after the start x: a header and its value for a group."""


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A markdown table, the columns after the first right-aligned."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join(["---", *["---:"] * (len(header) - 1)]) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def detail_table(evaluation: RunEvaluation) -> list[str]:
    """One run on one env: every column of :data:`DETAIL_COLUMNS` by start x, then all."""
    groups = [(str(x), records) for x, records in grouped(evaluation.records, start_x).items()]
    rows = [[label, *(column(records) for _, column in DETAIL_COLUMNS)]
            for label, records in [*groups, ("all", evaluation.records)]]
    return markdown_table(["start x", *(name for name, _ in DETAIL_COLUMNS)], rows)


def success_table(evaluations: Sequence[RunEvaluation], key: Group,
                  labels: Callable[[int], str],
                  flag: Callable[[EpisodeRecord], bool] = succeeded) -> list[str]:
    """The share (episodes) for which ``flag`` (default: success) holds, of each evaluation (a
    row) by ``key`` (a column), then over every episode with a key."""
    keys = sorted({k for ev in evaluations for r in ev.records if (k := key(r)) is not None})
    rows = []
    for ev in evaluations:
        groups = grouped(ev.records, key)
        rows.append([ev.label, ev.env, *(success_cell(groups.get(k, []), flag) for k in keys),
                     success_cell([r for group in groups.values() for r in group], flag)])
    return markdown_table(["run", "env", *map(labels, keys), "all"], rows)


def delay_label(index: int) -> str:
    low, high = DELAYS[index]
    return f"delay {low}+" if high is None else f"delay {low}–{high}"


def pooled_by_cell(evaluations: Sequence[RunEvaluation]) -> list[RunEvaluation]:
    """The evaluations of each cell's seeds pooled, per env, in first-seen order."""
    pooled: dict[tuple[str, str], list[EpisodeRecord]] = {}
    for ev in evaluations:
        pooled.setdefault((ev.label.split("/")[0], ev.env), []).extend(ev.records)
    return [RunEvaluation(cell, env, 0, records) for (cell, env), records in pooled.items()]


def outcome_table(evaluations: Sequence[RunEvaluation]) -> list[str]:
    """Each evaluation's row of :data:`DETAIL_COLUMNS` over all its episodes."""
    rows = [[ev.label, ev.env, *(column(ev.records) for _, column in DETAIL_COLUMNS)]
            for ev in evaluations]
    return markdown_table(["run", "env", *(name for name, _ in DETAIL_COLUMNS)], rows)


READING = "## Reading"
"""The heading of the section written by hand, which a regenerated file keeps."""


def hand_written_reading(path: Path) -> list[str]:
    """The lines of ``path``'s :data:`READING` section, up to the next heading (none when the
    file or the section does not exist), so that regenerating the tables keeps the reading."""
    lines = path.read_text().splitlines() if path.exists() else []
    starts = [index for index, line in enumerate(lines) if line.startswith(READING)]
    if not starts:
        return []
    end = next((index for index in range(starts[0] + 1, len(lines))
                if lines[index].startswith("## ")), len(lines))
    return lines[starts[0]:end]


def report(evaluations: Sequence[RunEvaluation], command: str, seconds: float,
           reading: Sequence[str] = ()) -> str:
    """The markdown of ``S13_BY_START.md``, with the hand-written ``reading`` section kept."""
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    cells = pooled_by_cell(evaluations)
    lines = [
        "# MemoryS7 agents on MemoryS7 and MemoryS13, by start position",
        "",
        f"Generated by `{command}` (see its docstring) in {seconds / 60:.1f} min; load average "
        f"at the end: {load} on {os.cpu_count()} cores. Sampled actions, the env and action "
        "seeds of `python -m rlmem.evaluate` (its returns are reproduced exactly).",
        "",
        "The agent starts facing east at x in [1, 4] on MemoryS7 and in [1, 10] on MemoryS13 "
        "(middle row); the cue is at x = 1, the fork at x = 5 (S7) or 11 (S13). Cells read "
        "`success (episodes)`. *Fork*: the agent stands in the fork's column, one step from "
        "either object. *Saw cue before / from fork*: the cue was in an observation before "
        "the agent first reached the fork / once it had (it looked back). *Delay*: steps from "
        "the last observation showing the cue to the choice (the last step), what the memory "
        "has to span. *Chose key if cue ...*: the share of the episodes with that cue that "
        "ended at the key (among those that ended at an object); a policy that follows the "
        "cue has 100% and 0%, one that ignores it has the same share for both.",
        "",
        *reading,
        "## Success by start x, seeds pooled",
        "",
        *success_table(cells, start_x, lambda x: f"x={x}"),
        "",
        "## Success by start x, per run",
        "",
        *success_table(evaluations, start_x, lambda x: f"x={x}"),
        "",
        "## Timeouts by start x, per run",
        "",
        *success_table(evaluations, start_x, lambda x: f"x={x}", timed_out),
        "",
        "## Outcomes and what the agent saw, seeds pooled",
        "",
        *outcome_table(cells),
        "",
        "## Success by delay (episodes that saw the cue and reached an object), seeds pooled",
        "",
        *success_table(cells, delay_bucket, delay_label),
        "",
        "## Per run, by start x",
    ]
    for ev in evaluations:
        lines += ["", f"### {ev.label} on {ev.env} ({ev.frames} frames trained)", "",
                  *detail_table(ev)]
    return "\n".join(lines) + "\n"


def play_arguments(description: str, output: Path) -> argparse.ArgumentParser:
    """The options of the scripts that play trained runs: ``--runs``, ``--episodes``,
    ``--num-envs``, ``--seed`` (``rlmem.evaluate``'s) and ``--output``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=Path, nargs="+", required=True,
                        help="run directories trained on MemoryS7 (each holds checkpoint.pt); "
                             "only read")
    parser.add_argument("--episodes", type=int, default=EPISODES)
    parser.add_argument("--num-envs", type=int, default=NUM_ENVS)
    parser.add_argument("--seed", type=int, default=0, help="as rlmem.evaluate's seed")
    parser.add_argument("--output", type=Path, default=output)
    return parser


def parse_play_arguments(parser: argparse.ArgumentParser,
                         argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse, refusing counts that are not positive; one thread, as the measurements ran."""
    args = parser.parse_args(argv)
    if args.episodes <= 0 or args.num_envs <= 0:
        parser.error("--episodes and --num-envs must be positive")
    torch.set_num_threads(1)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    parser = play_arguments(__doc__.splitlines()[0], OUTPUT)
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--records", type=Path, default=None,
                        help="also write every episode's record here (JSON)")
    args = parse_play_arguments(parser, argv)
    started = time.monotonic()
    evaluations = []
    for run in args.runs:
        for env in args.envs:
            evaluation = evaluate_run_by_start(run, env, args.episodes, args.num_envs,
                                               args.seed)
            print(f"{evaluation.label} {evaluation.env}: success "
                  f"{percent(evaluation.records, succeeded)} "
                  f"({time.monotonic() - started:.0f}s)", flush=True)
            evaluations.append(evaluation)
    command = " ".join(["python", "-m", "experiments.memory.start_positions",
                        *(argv if argv is not None else sys.argv[1:])])
    reading = hand_written_reading(args.output)
    args.output.write_text(report(evaluations, command, time.monotonic() - started, reading))
    if args.records is not None:
        args.records.write_text(json.dumps(
            [{"run": ev.label, "env": ev.env,
              "episodes": [{**dataclasses.asdict(r), "outcome": r.outcome.value}
                           for r in ev.records]} for ev in evaluations], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""experiments.memory.start_positions: each episode's record says where the agent started
and how the episode ended, as the env and the evaluation's returns have it."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import ModuleType

import gymnasium as gym
import numpy as np
import pytest
from minigrid.core.actions import Actions
from minigrid.envs.memory import MemoryEnv
from minigrid.minigrid_env import MiniGridEnv

from experiments.memory import start_positions
from rlmem.envs import EnvOptions


@pytest.fixture(scope="module")
def script() -> ModuleType:
    return start_positions


class RandomActor:
    """Uniform random actions: an Actor with no memory."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def initial_state(self, num_envs: int) -> None:
        return None

    def act(self, observation: dict[str, np.ndarray], state: None, resets: np.ndarray,
            greedy: bool) -> tuple[np.ndarray, None]:
        return self.rng.integers(0, len(Actions), size=len(resets)), None


def walk_to(env: gym.Env, matching: bool) -> list[Actions]:
    """The actions that take the agent from its start straight to the fork and then to the
    object matching the cue (``matching``) or to the other one."""
    memory = env.unwrapped
    assert isinstance(memory, MemoryEnv)
    x, y = (int(v) for v in memory.agent_pos)
    target = memory.success_pos if matching else memory.failure_pos
    turn = Actions.left if target[1] < y else Actions.right  # the agent starts facing east
    return [Actions.forward] * (int(target[0]) - x) + [turn, Actions.forward]


@pytest.mark.parametrize("env_name", ["MemoryS7", "MemoryS13"])
@pytest.mark.parametrize("matching", [True, False])
def test_a_walked_episode_is_recorded_as_it_went(script: ModuleType, env_name: str,
                                                 matching: bool) -> None:
    log = script.MemoryEpisodeLog(EnvOptions().make(env_name))
    for seed in range(6):
        log.reset(seed=seed)
        start = tuple(int(v) for v in log.unwrapped.agent_pos)
        cue = log.unwrapped.grid.get(1, log.unwrapped.height // 2 - 1).type
        actions = walk_to(log, matching)
        total = 0.0
        for action in actions:
            _, reward, terminated, truncated, _ = log.step(action)
            total += float(reward)
        assert terminated and not truncated
        record = log.episodes[-1]
        assert (record.start_x, record.start_y) == start
        assert record.cue == cue and record.length == len(actions)
        assert record.episode_return == pytest.approx(total)
        assert record.success == (total > 0) == matching
        assert record.outcome is (script.Outcome.SUCCESS if matching
                                  else script.Outcome.WRONG_OBJECT)
        assert record.chosen == (cue if matching else {"key": "ball", "ball": "key"}[cue])
        assert record.steps_to_fork == len(actions) - 2
        assert record.cue_seen_at_start == (start[0] == 1)  # beside it, facing east
    assert len(log.episodes) == 6


def test_played_episodes_start_where_the_seeded_resets_put_the_agent(
        script: ModuleType) -> None:
    options, num_envs, seed = EnvOptions(), 2, 123
    make = functools.partial(options.make, "MemoryS7")
    records = script.play(RandomActor(0), "MemoryS7", make, 4, num_envs, seed)
    assert len(records) == 4
    for index in range(num_envs):  # each env's first episode: its reset with seed + index
        env = make()
        env.reset(seed=seed + index)
        assert isinstance(env.unwrapped, MiniGridEnv)
        first = records[2 * index]  # quotas of 2, env by env
        assert (first.start_x, first.start_y) == tuple(int(v) for v in env.unwrapped.agent_pos)
    unwrapped = make().unwrapped
    assert isinstance(unwrapped, MiniGridEnv)
    max_steps = unwrapped.max_steps
    for record in records:
        assert record.success == (record.outcome is script.Outcome.SUCCESS)
        assert (record.outcome is script.Outcome.TIMEOUT) == (record.length == max_steps)


def test_an_agent_that_only_turns_times_out(script: ModuleType) -> None:
    log = script.MemoryEpisodeLog(EnvOptions().make("MemoryS13"))
    log.reset(seed=0)
    truncated = False
    while not truncated:
        _, _, terminated, truncated, _ = log.step(Actions.left)
        assert not terminated
    record = log.episodes[-1]
    assert record.outcome is script.Outcome.TIMEOUT and not record.success
    assert not record.reached_fork and record.delay is None and record.chosen is None


def test_a_regenerated_report_keeps_the_hand_written_reading(script: ModuleType,
                                                             tmp_path: Path) -> None:
    output = tmp_path / "S13_BY_START.md"
    assert script.hand_written_reading(output) == []
    output.write_text("# title\n\nintro\n\n## Reading (by hand)\n\n- a finding\n\n"
                      "## Success by start x, seeds pooled\n\n| table |\n")
    reading = script.hand_written_reading(output)
    assert reading == ["## Reading (by hand)", "", "- a finding", ""]
    assert "\n".join(reading) in script.report([], "command", 1.0, reading)


def test_a_run_is_replayed_with_the_eval_memory_of_its_stored_evaluation(
        script: ModuleType, tmp_path: Path) -> None:
    """MemLSTM is evaluated with the capacity of the longest episode; the replay reads it from
    the stored evaluation instead of falling back to the trained capacity."""
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "MemoryS13.json").write_text(
        json.dumps({"env": "MemoryS13", "eval_memory": {"capacity": 845}}))
    assert script.stored_eval_memory(tmp_path, "MemoryS13") == {"capacity": 845}
    assert script.stored_eval_memory(tmp_path, "MemoryS7") == {}

"""The resumable steps of the reproduction suites (``experiments.common.sweep``)."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.common.sweep import (
    evaluation_command,
    final_frames,
    full_attention,
    run_dirs,
    run_memory,
)
from rlmem.evaluate import report_path


def test_memlstm_attends_over_the_longest_episode_of_the_evaluated_envs() -> None:
    assert full_attention("memlstm", ["DoorKey-5x5", "DoorKey-16x16"]) == {"capacity": 2560}
    assert full_attention("relstm", ["DoorKey-16x16"]) == {}
    assert full_attention("sb3_lstm", ["DoorKey-16x16"]) == {}


def test_an_evaluation_is_skipped_only_when_its_json_is_up_to_date(tmp_path: Path) -> None:
    run = run_dirs(tmp_path, "MemoryS7", ["lstm"], [0])[0]
    run.mkdir(parents=True)
    assert final_frames(run) is None
    (run / "progress.csv").write_text("frames,updates\n2048.0,1\n4096.0,2\n")
    assert final_frames(run) == 4096
    command = evaluation_command(run, "MemoryS13", 200, {"capacity": 845})
    assert command is not None and command[-3:] == ["env=MemoryS13", "episodes=200",
                                                    "+eval_memory.capacity=845"]
    (run / "eval").mkdir()
    report = report_path(run, "MemoryS13", episodes=200)
    report.write_text(json.dumps({"frames": 4096, "episodes": 200}))
    assert evaluation_command(run, "MemoryS13", 200) is None
    assert evaluation_command(run, "MemoryS13", 100) is not None  # other episode count
    report.write_text(json.dumps({"frames": 2048, "episodes": 200}))
    assert evaluation_command(run, "MemoryS13", 200) is not None  # trained on since
    # A MemLSTM evaluated over a sliding window is evaluated again with full attention.
    full = {"capacity": 845}
    report.write_text(json.dumps({"frames": 4096, "episodes": 200, "eval_memory": {}}))
    assert evaluation_command(run, "MemoryS13", 200, full) is not None
    # Each eval_memory has its own report.
    report_path(run, "MemoryS13", episodes=200, eval_memory=full).write_text(json.dumps(
        {"frames": 4096, "episodes": 200, "eval_memory": {"capacity": 845}}))
    assert evaluation_command(run, "MemoryS13", 200, full) is None


def test_an_ablations_memory_is_read_from_its_config_not_its_label(tmp_path: Path) -> None:
    run = tmp_path / "MemoryS7" / "memlstm_view3_direction" / "seed0"
    assert run_memory(run) == "memlstm_view3_direction"  # no config yet: the label
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("env: MemoryS7\nmemory:\n  name: memlstm\n"
                                     "  capacity: 256\n")
    assert run_memory(run) == "memlstm"
    assert full_attention(run_memory(run), ["MemoryS7", "MemoryS13"]) == {"capacity": 845}


def test_a_namespaced_env_is_found_where_rlmem_evaluate_writes_it(tmp_path: Path) -> None:
    # A gymnasium id's namespace slash must not make the sweep look in a subdirectory and
    # re-evaluate a finished run at every sitting.
    run = tmp_path / "run"
    run.mkdir()
    (run / "progress.csv").write_text("frames,updates\n2048.0,1\n")
    report = report_path(run, "MiniGrid/MemoryS13", episodes=10)
    assert report == run / "eval" / "MiniGrid_MemoryS13_sampled_10ep_seed0.json"
    report.parent.mkdir()
    report.write_text(json.dumps({"frames": 2048, "episodes": 10}))
    assert evaluation_command(run, "MiniGrid/MemoryS13", 10) is None

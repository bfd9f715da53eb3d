"""``experiments/fast_trainer/learning.py``: the reference arm read from the tensor-backend
comparison's runs, and (slow) both arms trained, evaluated zero-shot and compared at tiny
frames."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from cli_runner import TINY_PPO, run_cli

from experiments.common import arm_runs
from experiments.fast_trainer import (
    blocked_lstm,
    blocked_products,
    compiled_lstm,
    compiled_lstm_more_seeds,
    fast_default,
    folded_grid,
    fused_adam_learning,
    fused_adam_more_seeds,
    learning,
    memory_products,
    more_seeds,
    processes,
    rule_calibration,
    window_convolution,
)
from experiments.tensor_backend import compare as tensor_backend
from rlmem.agents.ppo import PPOConfig

TINY = [arg for arg in TINY_PPO if not arg.startswith(("frames=", "progress_bar="))]


def test_the_reference_is_the_tensor_backend_comparisons_gymnasium_arm(tmp_path: Path) -> None:
    # The committed gymnasium runs are read where they are, with nothing of the fast arm yet.
    case = learning.CASES[0]
    lines = learning.compare(tmp_path, *learning.arms(tensor_backend.RUNS), case, case.frames)
    reference = next(line for line in lines if line.strip().startswith("reference"))
    gymnasium = next(line for line in tensor_backend.compare(tensor_backend.RUNS, case,
                                                             case.frames)
                     if line.strip().startswith("gymnasium"))
    assert reference.split()[1:] == gymnasium.split()[1:]
    assert any(line.startswith(f"{case.env} (lstm, seeds 3-7), zero-shot on DoorKey-16x16")
               for line in lines)
    assert not list(tmp_path.iterdir())  # reading trained and wrote nothing


@pytest.mark.slow  # two tiny runs and four evaluations, two of them on MemoryS13
def test_learning_trains_both_arms_evaluates_zero_shot_and_reports(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arm_runs, "run_child", lambda command: run_cli(
        command[2], *command[3:], cwd=tmp_path).returncode)
    fast, reference = tmp_path / "fast", tmp_path / "reference"
    argv = ["--runs", str(fast), "--reference-runs", str(reference), "--frames", "512",
            "--envs", "MemoryS7", "--seeds", "3", "--", *TINY]
    assert learning.main(argv) == 0
    for run in (fast / "MemoryS7" / "fast" / "seed3",
                reference / "MemoryS7" / "gymnasium" / "seed3"):
        assert arm_runs.trained_frames(run) == 512  # MemoryS7 ends an episode by 245 steps
        assert arm_runs.evaluation(run, "MemoryS13", learning.TRANSFER_EPISODES).exists()
    assert "preset: fast" in (fast / "MemoryS7" / "fast" / "seed3" / "config.yaml").read_text()
    reference_config = (reference / "MemoryS7" / "gymnasium" / "seed3" / "config.yaml").read_text()
    assert "preset: minigrid" in reference_config and "env_backend: gymnasium" in reference_config
    out = capsys.readouterr().out
    assert "MemoryS7 fast seed 3: training" in out and "P(fast ≥ reference)" in out
    results = tmp_path / "RESULTS.md"
    monkeypatch.setattr(learning, "RESULTS", results)
    assert learning.main(["--write", *argv]) == 0  # nothing left to do
    assert "training" not in capsys.readouterr().out
    assert "zero-shot on MemoryS13 (100 episodes):" in results.read_text()


def test_two_processes_are_compared_with_the_fast_presets_own_runs(tmp_path: Path) -> None:
    """``experiments/fast_trainer/processes.py`` reads the one-process arm where
    ``learning.py`` keeps it; a missing run of two processes is a dash, not a failure."""
    case = learning.CASES[0]
    lines = learning.compare(learning.RUNS, learning.FAST, processes.TWO, case, case.frames)
    ours = learning.compare(learning.RUNS, *learning.arms(tensor_backend.RUNS), case,
                            case.frames)
    def fast(lines: list[str]) -> list[list[str]]:  # the values, whatever the name's width
        return [line.split()[1:] for line in lines if line.strip().startswith("fast ")]

    assert fast(lines) == fast(ours) and len(fast(ours)) == 3
    assert "P(fast, 2 processes ≥ fast)" in "\n".join(lines)
    assert processes.TWO.overrides == ("agent.preset=fast", "agent.processes=2")


@pytest.mark.slow  # a tiny run of two processes and its evaluations
def test_processes_trains_the_two_process_arm_and_reports(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arm_runs, "run_child", lambda command: run_cli(
        command[2], *command[3:], cwd=tmp_path).returncode)
    tiny = [arg for arg in TINY if not arg.startswith("num_envs=")] + ["num_envs=4"]
    assert processes.main(["--runs", str(tmp_path), "--frames", "512", "--envs", "MemoryS7",
                           "--seeds", "3", "--", *tiny]) == 0
    run = tmp_path / "MemoryS7" / "fast_processes2" / "seed3"
    assert arm_runs.trained_frames(run) == 512
    assert "processes: 2" in (run / "config.yaml").read_text()
    assert arm_runs.evaluation(run, "MemoryS13", learning.TRANSFER_EPISODES).exists()
    assert "P(fast, 2 processes ≥ fast)" in capsys.readouterr().out


def test_the_folded_grid_page_is_its_runs_compared() -> None:
    """``FOLDED_GRID.md`` is what ``folded_grid.py`` computes from the committed runs of both
    arms (the modules' read where ``learning.py`` keeps them), and the folded arm differs from
    those runs in the fold alone (they recorded Adam's fused kernel)."""
    lines = [line for case in learning.CASES
             for line in learning.compare(learning.RUNS, learning.FAST, folded_grid.FOLDED,
                                          case, case.frames)]
    assert folded_grid.results_page(lines) == folded_grid.RESULTS.read_text()
    assert folded_grid.FOLDED.overrides == ("agent.preset=fast", "agent.folded_grid=true",
                                            "agent.fused_adam=true", "agent.compiled_lstm=false")
    modules = (learning.RUNS / "MemoryS7" / "fast" / "seed3" / "config.yaml").read_text()
    folded = (learning.RUNS / "MemoryS7" / "fast_folded" / "seed3" / "config.yaml").read_text()
    assert "fused_adam: true" in modules and "fused_adam: true" in folded
    assert "folded_grid: true" in folded and "folded_grid" not in modules
    assert "compiled_lstm" not in folded  # from before the key: torch's kernel, as pinned now


KERNEL_CHECKS = {"window_convolution": (compiled_lstm.COMPILED, window_convolution.WINDOWS, ()),
                 "blocked_lstm": (window_convolution.WINDOWS, blocked_lstm.BLOCKED, ()),
                 "blocked_products": (blocked_lstm.BLOCKED, blocked_products.PRODUCTS,
                                      ("agent.blocked_products=true",))}
"""Each check's arms, and what the new arm's overrides add."""


@pytest.mark.parametrize("name", list(KERNEL_CHECKS))
def test_a_kernel_page_is_its_runs_compared(name: str) -> None:
    """``WINDOW_CONVOLUTION.md``, ``BLOCKED_LSTM.md`` and ``BLOCKED_PRODUCTS.md`` are what their
    modules compute from the committed runs of both arms, each arm with the compiled LSTM's
    overrides (the first two kernels are their commits', not keys) and the last's new arm its
    key beside them."""
    check = {"window_convolution": window_convolution, "blocked_lstm": blocked_lstm,
             "blocked_products": blocked_products}[name]
    old, new, added = KERNEL_CHECKS[name]
    lines = [line for case in learning.CASES
             for line in learning.compare(learning.RUNS, old, new, case, case.frames)]
    assert check.results_page(lines) == check.RESULTS.read_text()
    assert old.overrides == compiled_lstm.COMPILED.overrides
    assert new.overrides == (*compiled_lstm.COMPILED.overrides, *added)


def test_the_fused_adam_check_compares_relstm_runs_that_differ_in_the_kernel_alone() -> None:
    """``fused_adam_learning.py``'s two arms pin the keys a run would decide (the fold, one
    update thread) and differ in ``agent.fused_adam`` alone; its lines name relstm."""
    foreach, fused = fused_adam_learning.FOREACH, fused_adam_learning.FUSED
    assert set(foreach.overrides) ^ set(fused.overrides) == {"agent.fused_adam=false",
                                                             "agent.fused_adam=true"}
    assert {"agent.preset=fast", "agent.folded_grid=true",
            "agent.update_threads=1"} <= set(foreach.overrides)
    case = learning.CASES[0]
    lines = learning.compare(learning.RUNS, foreach, fused, case, case.frames,
                             fused_adam_learning.MEMORY)
    assert lines[0].startswith(f"{case.env} (relstm, seeds 3-7), last return_recent")
    assert "P(fast, fused ≥ fast, foreach)" in "\n".join(lines)


def test_the_memory_products_page_is_its_relstm_runs_compared() -> None:
    """``MEMORY_PRODUCTS.md`` is what ``memory_products.py`` computes from the committed relstm
    runs of both arms, which pin the keys a run would decide and differ in
    ``agent.memory_products`` alone, and each run recorded its value."""
    torch_arm, new_arm = memory_products.TORCH, memory_products.MEMORY_PRODUCTS
    assert set(torch_arm.overrides) ^ set(new_arm.overrides) == {
        "agent.memory_products=false", "agent.memory_products=true"}
    lines = [line for case in learning.CASES
             for line in learning.compare(learning.RUNS, torch_arm, new_arm, case, case.frames,
                                          memory_products.MEMORY)]
    assert memory_products.results_page(lines) == memory_products.RESULTS.read_text()
    for arm, value in ((torch_arm, "false"), (new_arm, "true")):
        run = learning.RUNS / "MemoryS7" / str(arm.directory) / "seed3" / "config.yaml"
        assert f"memory_products: {value}" in run.read_text()


def test_the_compiled_lstm_page_is_its_runs_compared() -> None:
    """``COMPILED_LSTM.md`` is what ``compiled_lstm.py`` computes from the committed runs of
    both arms (the kernel's read where ``folded_grid.py`` keeps them), and the compiled arm
    differs from those runs in ``agent.compiled_lstm`` alone."""
    lines = [line for case in learning.CASES
             for line in learning.compare(learning.RUNS, folded_grid.FOLDED,
                                          compiled_lstm.COMPILED, case, case.frames)]
    assert compiled_lstm.results_page(lines) == compiled_lstm.RESULTS.read_text()
    assert compiled_lstm.COMPILED.overrides == (*folded_grid.WITH_FOLD,
                                                "agent.compiled_lstm=true")
    assert folded_grid.FOLDED.overrides == (*folded_grid.WITH_FOLD, "agent.compiled_lstm=false")
    run = learning.RUNS / "DoorKey-5x5" / "fast_compiled_lstm" / "seed3" / "config.yaml"
    assert "compiled_lstm: true" in run.read_text()


def test_the_fused_adam_page_is_its_runs_compared() -> None:
    """``FUSED_ADAM_LEARNING.md`` is what ``fused_adam_learning.py`` computes from the
    committed runs of both arms, which recorded the kernel they were asked for."""
    lines = [line for case in learning.CASES
             for line in learning.compare(learning.RUNS, fused_adam_learning.FOREACH,
                                          fused_adam_learning.FUSED, case, case.frames,
                                          fused_adam_learning.MEMORY)]
    assert fused_adam_learning.results_page(lines) == fused_adam_learning.RESULTS.read_text()
    for arm, kernel in ((fused_adam_learning.FOREACH, "false"),
                        (fused_adam_learning.FUSED, "true")):
        config = arm.run_dir(learning.RUNS, "MemoryS7", 7) / "config.yaml"
        assert f"fused_adam: {kernel}" in config.read_text()


def test_the_rule_calibrations_relabelings_are_every_swap_and_every_split() -> None:
    paired = rule_calibration.relabelings(paired=True)
    assert len(paired) == 32 and len({tuple(chosen) for chosen in paired}) == 32
    for chosen in paired:  # one run of each seed: seed k is run k (old) or k + 5 (new)
        assert sorted(int(run) % 5 for run in chosen) == [0, 1, 2, 3, 4]
    unpaired = rule_calibration.relabelings(paired=False)
    assert len({tuple(chosen) for chosen in unpaired}) == 252
    assert all(len(set(chosen.tolist())) == 5 for chosen in unpaired)


def test_the_one_interval_rate_depends_on_ranks_alone() -> None:
    # What makes enumerating rank patterns exact for every continuous distribution.
    generator = np.random.default_rng(1)
    new, old = generator.normal(size=5), generator.normal(size=5)
    assert rule_calibration.upper_bound(new, old) == rule_calibration.upper_bound(
        np.exp(3 * new), np.exp(3 * old))
    # The arms' labels swapped: P becomes 1 - P, so a pattern fails one way or the other.
    ranks = np.arange(10.0)
    assert rule_calibration.upper_bound(ranks[:5], ranks[5:]) < 0.5
    assert rule_calibration.upper_bound(ranks[5:], ranks[:5]) == 1.0


def test_the_rule_calibration_page_is_regenerated_from_the_committed_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    written = tmp_path / "RULE_CALIBRATION.md"
    monkeypatch.setattr(rule_calibration, "RESULTS", written)
    assert rule_calibration.main(["--write"]) == 0
    assert written.read_text() == rule_calibration.HERE.joinpath(
        "RULE_CALIBRATION.md").read_text()


def test_the_rule_calibration_relabels_any_number_of_seeds() -> None:
    # The check on more seeds relabels fifteen a side: every swap of a seed's two runs.
    generator = np.random.default_rng(2)
    old, new = generator.normal(size=3).tolist(), generator.normal(size=3).tolist()
    values: dict[str, dict[str, list[float | None]]] = {"m": {"old": old, "new": new}}
    observed, bounds = rule_calibration.lowest_upper_bounds(values, "old", "new", paired=True)
    assert len(bounds) == 2 ** 3
    assert observed == rule_calibration.upper_bound(new, old)
    assert observed in bounds  # the observed labelling is one of the relabelings


def test_the_more_seeds_rule_turns_the_compiled_lstm_on_only_without_evidence_of_harm() -> None:
    """The rule of ``more_seeds.py``: p is the share of within-seed swaps at or
    below the observed lowest upper bound; below 0.05 the key stays off."""
    seeds = list(range(6))
    generator = np.random.default_rng(3)
    base = generator.normal(size=len(seeds))

    def env(shift: float) -> dict[str, dict[str, list[float | None]]]:
        old, new = (base + generator.normal(scale=0.01, size=len(seeds))).tolist(), (
            base + shift + generator.normal(scale=0.01, size=len(seeds))).tolist()
        return {"measure": {compiled_lstm.COMPILED.name: new,
                            folded_grid.FOLDED.name: old}}

    check = compiled_lstm_more_seeds.CHECK
    worse = more_seeds.decision_line(check, "compiled_lstm", [env(-1.0), env(-1.0)], seeds)
    # Every seed lower in both envs: only the observed labelling and none other is as low in
    # an env (1/64), so p = 1 - (63/64)² < 0.05.
    assert "p = 0.031" in worse and worse.endswith("stays off")
    alike = more_seeds.decision_line(check, "compiled_lstm", [env(0.0), env(0.0)], seeds)
    assert alike.endswith("agent.compiled_lstm: decided on")


def test_the_compiled_lstm_check_on_more_seeds_reads_the_first_checks_runs() -> None:
    """Seeds 3-7 of the check on more seeds are the first check's runs; the rule waits for
    every run of seeds 3-17."""
    case = learning.CASES[0]
    first = learning.measures(learning.RUNS, folded_grid.FOLDED, compiled_lstm.COMPILED, case,
                              case.frames)
    both = learning.measures(learning.RUNS, folded_grid.FOLDED, compiled_lstm.COMPILED, case,
                             case.frames, more_seeds.ALL_SEEDS)
    for measure, by_arm in first.items():
        for arm, values in by_arm.items():
            assert both[measure][arm][:len(learning.SEEDS)] == values
    assert set(more_seeds.ADDED_SEEDS).isdisjoint(learning.SEEDS)
    assert tuple(range(3, 18)) == more_seeds.ALL_SEEDS


MORE_SEEDS_CHECKS = [
    pytest.param(compiled_lstm_more_seeds, "compiled_lstm", learning.MEMORY, id="compiled_lstm"),
    pytest.param(fused_adam_more_seeds, "fused_adam", fused_adam_learning.MEMORY,
                 id="fused_adam"),
]
"""Each check on more seeds: its module, the key it decides and the memory its arms train."""


@pytest.mark.parametrize(("check", "key", "memory"), MORE_SEEDS_CHECKS)
def test_a_page_on_more_seeds_holds_its_runs_comparison(check: ModuleType, key: str,
                                                        memory: str) -> None:
    """``COMPILED_LSTM_MORE_SEEDS.md`` and ``FUSED_ADAM_MORE_SEEDS.md`` hold the comparison of
    the committed runs over seeds 3-17 and the decision the default follows (the rule's line,
    an exact permutation over 2¹⁵ relabelings an env, is the slow test's)."""
    page = check.RESULTS.read_text()
    for case in learning.CASES:
        for line in learning.compare(learning.RUNS, check.CHECK.old, check.CHECK.new, case,
                                     case.frames, memory, seeds=more_seeds.ALL_SEEDS):
            assert line in page
    assert f"agent.{key}: decided on" in page
    decided = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5",
                                                  "memory": {"name": memory}})
    assert decided[key] is True


@pytest.mark.slow  # the exact permutation p: 2 × 2¹⁵ relabelings of three bootstrap intervals
@pytest.mark.parametrize(("check", "key", "memory"), MORE_SEEDS_CHECKS)
def test_a_page_on_more_seeds_is_regenerated(check: ModuleType, key: str, memory: str,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    committed = check.RESULTS.read_text()
    written = tmp_path / check.RESULTS.name
    monkeypatch.setattr(check, "RESULTS", written)
    assert check.main(["--no-train", "--write"]) == 0
    assert written.read_text() == committed


def test_the_default_preset_check_differs_in_the_preset_alone() -> None:
    """``fast_default.py``: each cell's minigrid arm is its fast arm with the other preset, the
    kernels a run decides today pinned alike; the fast arms read the runs kept already (seeds
    3-17); the decision is what ``PPOConfig.decided`` takes today for both arms."""
    for memory, check in fast_default.CHECKS.items():
        assert set(check.old.overrides) ^ set(check.new.overrides) == {
            "agent.preset=minigrid", "agent.preset=fast"}
        for override in ("agent.folded_grid=true", "agent.fused_adam=true"):
            assert override in check.new.overrides
        for case in learning.CASES:
            for seed in more_seeds.ALL_SEEDS:
                config = (check.new.run_dir(learning.RUNS, case.env, seed)
                          / "config.yaml").read_text()
                assert f"name: {memory}" in config and "preset: fast" in config
        decided = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5",
                                                      "memory": {"name": memory}})
        pinned = dict(override.removeprefix("agent.").split("=")
                      for override in check.new.overrides)
        for key, value in pinned.items():
            if key != "preset":
                assert str(decided[key]).lower() == value
    assert fast_default.CHECKS["lstm"].old.directory == "minigrid"
    with pytest.raises(ValueError, match=r"does not ask for agent\.preset=fast"):
        fast_default.minigrid_arm(learning.arms(tensor_backend.RUNS)[0], "x")


@pytest.mark.slow  # two tiny runs and their evaluations
def test_the_default_preset_check_trains_the_minigrid_arm(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arm_runs, "run_child", lambda command: run_cli(
        command[2], *command[3:], cwd=tmp_path).returncode)
    assert fast_default.main(["--runs", str(tmp_path), "--frames", "512", "--envs", "MemoryS7",
                              "--seeds", "3", "--memories", "relstm", "--", *TINY]) == 0
    run = tmp_path / "MemoryS7" / "relstm_minigrid" / "seed3"
    assert arm_runs.trained_frames(run) == 512
    config = (run / "config.yaml").read_text()
    assert "preset: minigrid" in config and "fused_adam: true" in config
    assert arm_runs.evaluation(run, "MemoryS13", learning.TRANSFER_EPISODES).exists()
    out = capsys.readouterr().out
    assert "P(fast preset ≥ minigrid preset)" in out and "rule for relstm: not applied" in out


def test_the_default_preset_page_holds_its_runs_comparison() -> None:
    """``FAST_DEFAULT.md`` holds lstm's comparison of the committed runs over seeds 3-17 and
    the rule's verdict for it (the exact permutation is the command's), and the preset
    MiniGrid takes is still minigrid, as that verdict leaves it."""
    page = fast_default.RESULTS.read_text()
    check = fast_default.CHECKS["lstm"]
    for case in learning.CASES:
        for line in learning.compare(learning.RUNS, check.old, check.new, case, case.frames,
                                     "lstm", more_seeds.ALL_SEEDS):
            assert line in page
    assert "rule for lstm on seeds 3-17" in page and "the fast preset learns worse" in page
    decided = PPOConfig.decided({"name": "ppo"}, {"env": "DoorKey-5x5"})
    assert decided["preset"] == "minigrid"

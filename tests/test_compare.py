"""``python -m rlmem.compare``: run folders of each kind read back, grouped by setting, the
table's statistics, the figure, and the table a sweep ends with."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_runner import TINY_PPO, run_cli

from rlmem.compare import main as compare
from rlmem.comparison.collection import Group, Measure, Run, group_runs, read_run, run_folders
from rlmem.stats import iqm, probability_of_improvement, score_distribution

TINY_COPY = ["task=copy", "seq_len=10", "iterations=20", "eval_every=10", "batch_size=16",
             "eval_batch_size=32", "progress_bar=false", "figures=false", "device=cpu"]
"""A supervised copy run of 20 iterations at T = 10."""


def _run(seed: int, setting: dict[str, object], final: float, family: str = "env E") -> Run:
    measure = Measure("return_recent", True, "frames")
    return Run(Path(f"r{seed}"), "ppo", seed, setting, family, measure,
               np.array([0.0, 10.0]), np.array([0.0, final]), final)


def test_runs_group_by_setting_and_are_labelled_by_what_differs() -> None:
    lstm = {"memory.name": "lstm", "memory.forget_bias": 1.0, "agent.lr": 0.001}
    gru = {"memory.name": "gru", "memory.update_bias": 0.0, "agent.lr": 0.001}
    faster = {**gru, "agent.lr": 0.01}
    runs = [_run(seed, setting, seed + 0.5) for setting in (lstm, gru, faster)
            for seed in range(3)]
    runs.append(_run(0, lstm, 9.0, family="env F"))
    groups = group_runs(runs)
    assert [len(group.runs) for group in groups] == [3, 3, 3, 1]
    assert [group.label for group in groups] == [
        "agent.lr=0.001 memory=lstm", "agent.lr=0.001 memory=gru", "agent.lr=0.01 memory=gru",
        "lstm"]  # the bias keys come with the cell; a lone group is named by its cell
    assert [run.seed for run in groups[1].runs] == [0, 1, 2]
    np.testing.assert_array_equal(groups[0].finals, [0.5, 1.5, 2.5])


def test_a_lower_is_better_measure_is_compared_the_right_way() -> None:
    ce = Measure("ce@T10", False, "iterations")
    assert ce.better(np.array([0.1, 0.2])).tolist() == [-0.1, -0.2]
    assert not Measure("return_recent", True, "frames").better(np.array([1.0]))[0] < 0


def test_the_profile_agrees_with_rliable() -> None:
    """rliable's performance profile (its score distribution with the percentile bootstrap):
    the same values, and intervals within the Monte Carlo error of two bootstraps."""
    library = pytest.importorskip("rliable.library")
    scores = np.random.default_rng(1).uniform(size=(9, 2))
    taus = np.linspace(0, 1, 11)
    from rlmem.stats import score_distribution_estimate

    ours = score_distribution_estimate(scores, taus, reps=4000)
    values, intervals = library.create_performance_profile({"x": scores}, taus, reps=4000)
    np.testing.assert_allclose(ours.value, values["x"])
    np.testing.assert_allclose(score_distribution(scores, taus), values["x"])
    np.testing.assert_allclose(ours.low, intervals["x"][0], atol=2 / scores.size)
    np.testing.assert_allclose(ours.high, intervals["x"][1], atol=2 / scores.size)


@pytest.fixture(scope="module")
def copy_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A sweep of 2 cells × 3 seeds of the copy task, and what it printed."""
    here = tmp_path_factory.mktemp("sweep")
    result = run_cli("rlmem.supervised", "-m", "memory=lstm,gru", "seed=0,1,2",
                     "memory.hidden_size=8", *TINY_COPY, cwd=here)
    assert result.returncode == 0, result.stderr
    return here, result.stdout


def test_a_sweep_ends_with_the_table_of_its_runs(copy_sweep: tuple[Path, str]) -> None:
    _, output = copy_sweep
    table = output[output.index("The sweep's 6 runs, by setting:"):]
    assert "task copy T=10: accuracy@T10 at the end of each run (higher is better)" in table
    assert re.search(r"memory=lstm\s+3\s+[\d.]+ \[[\d.]+, [\d.]+\]\s+0: ", table)
    assert re.search(r"memory=gru\s+3\s+", table)
    assert "P(memory=lstm > memory=gru) = " in table
    assert "python -m rlmem.compare 'runs/supervised/copy/lstm_T10" in table


def test_compare_prints_the_table_and_writes_the_figure(
        copy_sweep: tuple[Path, str], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    here, _ = copy_sweep
    monkeypatch.chdir(here)
    assert compare(["runs/supervised/copy/*", "--threshold", "0.1", "--plot", "out/c.png",
                    "--profile", "--reps", "200"]) == 0
    output = capsys.readouterr().out
    assert output.startswith("6 runs in 2 settings")
    runs = [read_run(path) for path in run_folders(["runs/supervised/copy"])]
    finals = {name: [run.final for run in runs
                     if run.setting["memory.name"] == name and run.final is not None]
              for name in ("lstm", "gru")}
    for name, values in finals.items():
        assert len(values) == 3
        k = sum(value >= 0.1 for value in values)
        row = re.search(rf"memory={name}\s+3\s+{k} of 3\s+(\S+) \[", output)
        assert row is not None, output
        assert row.group(1) == f"{iqm(values):.4g}"
    p = probability_of_improvement(finals["gru"], finals["lstm"])  # the glob's sorted order
    assert f"P(memory=gru > memory=lstm) = {p:.2f}" in output
    figure = here / "out" / "c.png"
    assert figure.read_bytes().startswith(b"\x89PNG") and f"figure: {Path('out/c.png')}" in output


def test_rl_runs_of_both_agents_are_read(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Our PPO and agent=sb3, on CartPole (sb3 beyond MiniGrid), and on DoorKey, where no
    episode ends in 64 frames: no return yet, said so, not a crash."""
    for agent in ("ppo", "sb3"):
        overrides = [override for override in TINY_PPO if not override.startswith(
            "agent.recurrence")] if agent == "sb3" else TINY_PPO
        for env in ("CartPole-v1", "DoorKey-5x5"):
            result = run_cli("rlmem.train", f"agent={agent}", f"env={env}", "memory=gru",
                             *overrides, cwd=tmp_path)
            assert result.returncode == 0, result.stderr
    runs = [read_run(path) for path in run_folders([str(tmp_path / "runs")])]
    assert sorted((run.kind, run.family) for run in runs) == [
        (agent, f"env {env}") for agent in ("ppo", "sb3") for env in ("CartPole-v1",
                                                                      "DoorKey-5x5")]
    for run in runs:
        assert run.measure.higher_is_better and run.x.tolist() == [32.0, 64.0][2 - run.y.size:]
        assert (run.final is None) == (run.family == "env DoorKey-5x5")
    losses = [read_run(run.path, "loss/value") for run in runs]
    assert all(not run.measure.higher_is_better and run.final == run.y[-1] for run in losses)
    assert compare([str(tmp_path / "runs")]) == 0
    output = capsys.readouterr().out
    cartpole, doorkey = output.split("env DoorKey-5x5")
    assert re.search(r"agent=sb3[^\n]*\s1\s+\S+ \[", cartpole)  # a return
    assert re.search(r"agent=ppo[^\n]*\s0 of 1 measured so far", doorkey)  # none yet
    assert compare([str(tmp_path / "nothing*")]) == 2
    assert "matches no file or folder" in capsys.readouterr().err


def test_group_finals_skip_runs_without_a_measure() -> None:
    group = Group({}, [_run(0, {}, 1.0)])
    assert group.finals.tolist() == [1.0]


def test_the_statistics_command_points_to_compare() -> None:
    result = run_cli("rlmem.stats", "--help", cwd=Path.cwd())
    assert result.returncode == 0 and "python -m rlmem.compare" in result.stdout
    help_text = run_cli("rlmem.compare", "--help", cwd=Path.cwd()).stdout
    assert "--threshold" in help_text and "tensorboard --logdir runs" in help_text


@pytest.mark.parametrize("suite", ["memory", "transfer", "popgym", "supervised"])
def test_a_suites_aggregate_answers_help(suite: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` prints the usage and writes nothing, not the whole RESULTS.md."""
    import importlib

    aggregate = importlib.import_module(f"experiments.{suite}.aggregate")
    results = Path(str(aggregate.__file__)).parent / "RESULTS.md"
    before = results.stat().st_mtime_ns
    with pytest.raises(SystemExit) as stopped:
        aggregate.main(["--help"])
    assert stopped.value.code == 0
    output = capsys.readouterr().out
    assert output.startswith("usage:") and "| " not in output
    assert results.stat().st_mtime_ns == before


def test_the_sweep_callback_leaves_the_comparison_modules_unloaded() -> None:
    """Every run builds the sweep's callback (conf/train.yaml's ``hydra.callbacks``): loading
    it must not load what only a sweep's end reads (the supervised tasks, matplotlib)."""
    code = ("import sys, rlmem.comparison.sweep_table\n"
            "print(sorted(name for name in ('matplotlib', 'rlmem.tasks', "
            "'rlmem.comparison.collection') if name in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stderr

"""The POPGym suite: what its dry run plans, POPGym's MMER and the aggregator's statistics on a
tiny synthetic run folder, checked against a hand computation, and the sb3 reference's
observations."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import gymnasium as gym
import pytest
from locations import REPO

from experiments.common.outcome import Outcome
from experiments.popgym import aggregate, reading, suite
from experiments.popgym.mmer import MIN_EPISODES, mmer
from experiments.popgym.sb3_reference import make_env
from rlmem.cells import CELLS

COLUMNS = ["frames", "updates", "episodes", "return_mean", "return_recent"]


def fake_run(run_dir: Path, rows: list[tuple[int, float]], budget: int,
             update: int = 2048) -> None:
    """A run's ``config.yaml`` (its budget) and ``progress.csv``: one row per (episodes ended
    in the update, return_recent)."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(f"frames: {budget}\n")
    with (run_dir / "progress.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(COLUMNS)
        for index, (episodes, recent) in enumerate(rows, start=1):
            writer.writerow([index * update, index, episodes, recent, recent])


def test_the_dry_run_lists_every_planned_run_and_comments_out_a_finished_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    finished = suite.run_dir(tmp_path, "CountRecallEasy", "gru", 3)
    fake_run(finished, [(100, 0.0)], budget=suite.FRAMES, update=suite.FRAMES)
    assert suite.main(["--dry-run", "--runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    names = [line for line in out.splitlines() if line.startswith("# ") and ": " in line
             and " seed " in line]
    planned = len(suite.ENVS) * len(suite.AGENTS) * len(suite.SEEDS)
    assert len(names) == planned and len(suite.ENVS) == 8 and len(suite.SEEDS) == 5
    assert sum("not started" in line for line in names) == planned - 1
    assert f"# CountRecallEasy gru seed 3: finished: {suite.FRAMES} frames" in out
    assert (f"# python -m rlmem.train env=CountRecallEasy memory=gru seed=3 "
            f"frames={suite.FRAMES}") in out
    lstm = suite.run_dir(tmp_path, "RepeatPreviousEasy", "lstm", 0)
    assert (f"\npython -m rlmem.train env=RepeatPreviousEasy memory=lstm "
            f"seed=0 frames={suite.FRAMES} progress_bar=false run_dir={lstm} "
            f"vectorization=sync\n") in out
    sb3 = suite.run_dir(tmp_path, "BattleshipEasy", suite.REFERENCE, 4)
    assert (f"\npython -m experiments.popgym.sb3_reference --env BattleshipEasy --seed 4 "
            f"--frames {suite.FRAMES} --run-dir {sb3}\n") in out
    autoencode = suite.run_dir(tmp_path, "AutoencodeEasy", "relstm", 1)
    assert (f"run_dir={autoencode} vectorization=sync "
            f"wrappers=[gymnasium.wrappers:FlattenObservation]\n" in out)
    assert set(suite.AGENTS) == {*CELLS, suite.REFERENCE}  # every registered cell, and sb3


def speed_run(run_dir: Path, fps: list[float]) -> None:
    """A ``progress.csv`` of one update of 2,048 frames per ``fps`` value."""
    run_dir.mkdir(parents=True)
    with (run_dir / "progress.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["frames", "updates", "fps"])
        for index, value in enumerate(fps, start=1):
            writer.writerow([index * 2048, index, value])


def test_the_dry_run_says_the_cpu_hours_left_at_the_recorded_speeds(tmp_path: Path) -> None:
    """Each agent's speed is the median over its runs of each run's median fps, the first two
    updates (the start-up) left out; the hours are the frames left over that speed."""
    recorded = tmp_path / "recorded"
    speed_run(recorded / "RepeatFirstEasy" / "lstm" / "seed0", [1.0, 1.0, 900, 1000, 1100])
    speed_run(recorded / "BattleshipEasy" / "lstm" / "seed1", [5.0, 5.0, 3000, 3000, 3000])
    speed_run(recorded / "BattleshipEasy" / "lstm" / "seed2", [5.0, 5.0, 2000])
    speed_run(recorded / "BattleshipEasy" / "gru" / "seed0", [5.0, 5.0, 500])
    speeds = suite.recorded_speeds(recorded)
    assert speeds == {"lstm": 2000.0, "gru": 500.0}
    budget = 3_600_000
    runs = suite.planned(tmp_path / "new", ["RepeatFirstEasy"], ["lstm", "gru", "ffm"], [0, 1],
                         budget)
    half = runs[0].run_dir  # lstm seed 0, trained half its budget
    fake_run(half, [(1, 0.0)], budget=budget, update=budget // 2)
    hours, unknown = suite.hours_left(runs, speeds)
    assert unknown == ["ffm"]
    assert hours == pytest.approx((0.5 + 1) * budget / 2000 / 3600 + 2 * budget / 500 / 3600)


def test_mmer_is_the_largest_100_episode_mean_once_100_episodes_ended(tmp_path: Path) -> None:
    # 0.9 after 60 episodes does not count; after 120: 0.2, after 180: 0.5, after 240: 0.4.
    fake_run(tmp_path / "run", [(60, 0.9), (60, 0.2), (60, 0.5), (60, 0.4)], budget=8192)
    assert MIN_EPISODES == 100
    assert mmer(tmp_path / "run") == 0.5
    fake_run(tmp_path / "short", [(60, 0.9)], budget=2048)
    assert mmer(tmp_path / "short") is None


def test_the_aggregator_matches_a_hand_computation(tmp_path: Path) -> None:
    env = "RepeatPreviousEasy"
    ours = [0.1, 0.3, 0.2, 0.5, 0.4]  # MMER of seeds 0-4: each run's best counted point
    for seed, best in enumerate(ours):
        fake_run(tmp_path / env / "lstm" / f"seed{seed}", [(100, best - 0.05), (100, best)],
                 budget=4096)
    for seed, best in enumerate([0.25, 0.0]):
        fake_run(tmp_path / env / suite.REFERENCE / f"seed{seed}", [(100, best)], budget=2048)
    fake_run(tmp_path / env / "gru" / "seed0", [(100, 0.7)], budget=4096)  # still training

    runs = aggregate.collect(tmp_path)
    assert {run.seed: run.mmer for run in runs if run.agent == "lstm"} == dict(enumerate(ours))
    # IQM of 5: drop floor(5/4) = 1 from each end -> mean(0.2, 0.3, 0.4) = 0.3.
    estimate = aggregate.iqm_estimate(list(aggregate.scores(runs, env, "lstm").values()))
    assert estimate.value == pytest.approx(0.3)
    assert estimate.low <= 0.3 <= estimate.high
    text = aggregate.render(runs, "{{per_env}}\n{{improvement}}\n{{summary}}")
    assert (f"| {env} | lstm | 5 | 4,096 | 0.100, 0.300, 0.200, 0.500, 0.400 | 0.300 ["
            in text)
    assert f"| {env} | gru | 0 | — | not run (1 training) | — | not found offline |" in text
    assert "| CountRecallEasy | lstm | 0 | — | not run | — | not found offline |" in text
    # P(lstm > sb3): of the 10 pairs, lstm wins where it scores above 0.25 (3 seeds) against
    # seed 0 and everywhere (5) against seed 1: 8 / 10.
    # The issue's measure: lstm's IQM (0.3) against sb3's (of two seeds, their mean: 0.125).
    assert f"| {env} | 5 / 2 | 0.300 | 0.125 | yes | 0.800 [" in text
    assert "| **all 1 envs** | 5 / 2 | | | **1 of 1** | **0.800 [" in text

    aggregate.main(["--runs", str(tmp_path), "--out", str(tmp_path / "out")])
    with (tmp_path / "out" / "mmer.csv").open() as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 8
    gru = next(row for row in rows if row["agent"] == "gru")
    assert gru["finished"] == "0" and gru["frames"] == "2048" and gru["budget"] == "4096"
    assert "{{" not in (tmp_path / "out" / "RESULTS.md").read_text()


def test_the_reading_counts_runs_that_end_lower_and_compares_seed_by_seed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = "BattleshipEasy"
    # Counted points (100 episodes ended) only: the 0.9 after 50 episodes is not the first.
    fake_run(tmp_path / env / "lstm" / "seed0", [(50, 0.9), (50, 0.2), (100, 0.1)],
             budget=6144)
    fake_run(tmp_path / env / "lstm" / "seed1", [(100, 0.1), (100, 0.3)], budget=4096)
    fake_run(tmp_path / env / "lstm" / "seed2", [(100, 0.5), (100, 0.1)], budget=8192)
    runs = aggregate.collect(tmp_path)
    assert reading.ends_lower(runs, env, "lstm") == (1, 2)  # seed2 is unfinished

    before = tmp_path / "before.csv"
    before.write_text("env,agent,seed,frames,budget,finished,mmer\n"
                      f"{env},lstm,0,6144,6144,1,0.2004\n{env},lstm,1,4096,4096,1,0.2\n"
                      f"{env},lstm,2,4096,4096,1,0.9\n")
    aggregate.main(["--runs", str(tmp_path), "--out", str(tmp_path)])
    capsys.readouterr()
    reading.main(["--runs", str(tmp_path), "--before", str(before),
                  "--after", str(tmp_path / "mmer.csv")])
    out = capsys.readouterr().out
    assert f"| {env} | lstm | 1 of 2 |" in out
    # seed0: 0.200 both (same at three decimals); seed1: 0.3 > 0.2; seed2 unfinished today.
    # "before" has no superseded column (as at 9bf6c98): its finished runs all count.
    assert "| lstm | 1 | 0 | 1 |" in out
    before.write_text("env,agent,seed,mmer\n")
    with pytest.raises(ValueError, match="no column finished"):
        reading.finished_scores(before)


def test_a_run_made_with_an_earlier_preset_leaves_the_tables_and_runs_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run of ours that recorded other values than its preset's today (here the generic
    preset's entropy bonus before it became 0) is listed in mmer.csv, not counted."""
    from rlmem.agents.ppo.presets import PRESETS, Preset, agent_values

    env = "HigherLowerEasy"
    agent = {"name": "ppo", **agent_values(Preset.generic), "preset": "generic"}
    memory = f"memory: {{name: gru, hidden_size: {PRESETS[Preset.generic].memory_size}}}"
    for seed, entropy in enumerate([0.01, agent["entropy_coef"]]):
        run = tmp_path / env / "gru" / f"seed{seed}"
        fake_run(run, [(100, 0.1 + seed)], budget=2048)
        recorded = {**agent, "entropy_coef": entropy}
        (run / "config.yaml").write_text(
            f"frames: 2048\nnum_envs: {PRESETS[Preset.generic].num_envs}\n{memory}\n"
            f"agent: {recorded}\n")
    fake_run(tmp_path / env / suite.REFERENCE / "seed0", [(100, 0.5)], budget=2048)

    runs = aggregate.collect(tmp_path)
    assert [(run.seed, run.superseded) for run in runs if run.agent == "gru"] == [
        (0, True), (1, False)]
    assert aggregate.scores(runs, env, "gru") == {1: pytest.approx(1.1)}
    assert aggregate.scores(runs, env, suite.REFERENCE) == {0: 0.5}  # sb3 has no preset
    # The suite runs the earlier one again (moved into previous/ by resume=false), not the
    # current one nor sb3's; with Hydra overrides (as the tuning gives) the values are the
    # overrides', and nothing runs again.
    plan = suite.planned(tmp_path, [env], ["gru", suite.REFERENCE], [0, 1], 2048)
    again = [run.name for run in plan if suite.runs_again(run)]
    assert again == [f"{env} gru seed 0"]
    # Planned again, but run again by another process of the suite before this one gets to it
    # (its config now records today's values): it is finished, and not run a third time.
    current = tmp_path / env / "gru" / "seed0" / "config.yaml"
    saved = current.read_text()
    current.write_text((tmp_path / env / "gru" / "seed1" / "config.yaml").read_text())
    progress = (current.parent / "progress.csv").read_text()
    assert suite.train_all([run for run in plan if suite.runs_again(run)], 1) == {
        again[0]: Outcome.done}
    assert not (current.parent / "previous").exists()  # nothing moved aside, nothing trained
    assert (current.parent / "progress.csv").read_text() == progress
    current.write_text(saved)
    assert not any(suite.runs_again(run) for run in suite.planned(
        tmp_path, [env], ["gru"], [0], 2048, ["agent.entropy_coef=0.01"]))
    assert suite.main(["--dry-run", "--runs", str(tmp_path), "--envs", env, "--agents", "gru",
                       "--seeds", "0", "1", "--frames", "2048"]) == 0
    out = capsys.readouterr().out
    assert (f"# {env} gru seed 0: made with an earlier preset; runs again, the earlier run "
            f"moved into previous/\npython -m rlmem.train env={env} memory=gru seed=0") in out
    *_, command, left = out.rstrip().splitlines()
    assert command.endswith("resume=false force=true") and left.startswith("# left: about ")

    shutil.rmtree(tmp_path / env / "gru" / "seed1")
    text = aggregate.render(aggregate.collect(tmp_path), "{{per_env}}")
    assert f"| {env} | gru | 0 | — | not run (1 with an earlier preset) | — |" in text


def test_a_run_committed_part_way_without_its_checkpoint_runs_again(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run committed before it finished (config and progress, no checkpoint: the repository
    keeps none) cannot resume, and ``rlmem.train`` would refuse its folder: the suite starts it
    again, with Hydra overrides or without, and the dry run says why."""
    env = "RepeatPreviousEasy"
    fake_run(suite.run_dir(tmp_path, env, "gtrxl", 0), [(100, 0.1)], budget=2048, update=1024)
    for extra in ([], ["agent.lr=1e-4"]):
        plan = suite.planned(tmp_path, [env], ["gtrxl"], [0, 1], 2048, extra)
        assert [run.name for run in plan if suite.runs_again(run)] == [f"{env} gtrxl seed 0"]
    assert suite.main(["--dry-run", "--runs", str(tmp_path), "--envs", env, "--agents",
                       "gtrxl", "--seeds", "0", "--frames", "2048"]) == 0
    out = capsys.readouterr().out
    assert (f"# {env} gtrxl seed 0: trained 1024 of 2048 frames, its checkpoint gone; runs "
            "again, the earlier run moved into previous/\npython -m rlmem.train") in out
    *_, command, left = out.rstrip().splitlines()
    assert command.endswith("resume=false force=true") and left.startswith("# left: about ")


def test_the_sb3_reference_flattens_tuple_and_multidiscrete_observations() -> None:
    autoencode = make_env(suite.env_argument("AutoencodeEasy")).observation_space
    assert isinstance(autoencode, gym.spaces.Box) and autoencode.shape == (6,)  # 2 + 4 one-hot
    count_recall = make_env(suite.env_argument("CountRecallEasy")).observation_space
    assert isinstance(count_recall, gym.spaces.Box) and count_recall.shape == (4,)
    assert isinstance(make_env(suite.env_argument("RepeatFirstEasy")).observation_space,
                      gym.spaces.Discrete)  # SB3 one-hot encodes it itself


@pytest.mark.slow
def test_the_suite_trains_lstm_and_sb3_and_the_aggregator_scores_both(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end at 4 updates (8192 frames, about 160 RepeatPrevious episodes): both agents'
    runs are trained, a second sitting starts nothing, and both get an MMER."""
    monkeypatch.chdir(REPO)  # python -m experiments.popgym.sb3_reference imports from here
    arguments = ["--envs", "RepeatPreviousEasy", "--agents", "lstm", suite.REFERENCE,
                 "--seeds", "0", "--frames", "8192", "--runs", str(tmp_path / "runs")]
    assert suite.main(arguments) == 0
    assert suite.main(arguments) == 0  # finished: nothing is started again
    runs = aggregate.collect(tmp_path / "runs")
    assert [(run.agent, run.frames, run.finished) for run in runs] == [
        ("lstm", 8192, True), (suite.REFERENCE, 8192, True)]
    assert all(run.mmer is not None and -1 <= run.mmer <= 1 for run in runs)


def test_tuning_plans_every_variant_seed_by_seed_and_refuses_the_suites_seeds(
        tmp_path: Path) -> None:
    """The generic preset's tuning (experiments/popgym/tune.py) runs on seeds the suite never
    runs, compares every variant on the same seed before the next, and reads each variant's
    MMER as the suite does."""
    from experiments.popgym import tune

    with pytest.raises(SystemExit):
        tune.main(["--seeds", "0", "--dry-run", "--runs", str(tmp_path)])
    runs = tune.planned(tmp_path, list(tune.VARIANTS), ["RepeatPreviousEasy"], [100, 101],
                        suite.FRAMES)
    assert len(runs) == 2 * len(tune.VARIANTS)
    first = runs[:len(tune.VARIANTS)]
    assert all(run.name.endswith("seed 100") for run in first)  # every variant on seed 100 first
    for run, variant in zip(first, tune.VARIANTS, strict=True):
        assert run.run_dir == suite.run_dir(tmp_path / tune.folder(variant),
                                            "RepeatPreviousEasy", "lstm", 100)
        assert list(run.command[-len(tune.VARIANTS[variant]):]) == list(tune.VARIANTS[variant])
    for seed, update in ((100, suite.FRAMES // 2), (101, 2048)):  # seed 101 has not finished
        fake_run(suite.run_dir(tmp_path / tune.folder("memory 256"), "RepeatPreviousEasy",
                               "lstm", seed), [(MIN_EPISODES, 0.5), (MIN_EPISODES, 0.9)],
                 suite.FRAMES, update)
    rows = tune.table(tmp_path, ["memory 256"], ["RepeatPreviousEasy"], [100, 101])
    assert rows[-1] == ("| memory 256 | `memory.hidden_size=256` `agent.entropy_coef=0.01` | "
                        "0.900, — |")
    report = tune.report(tmp_path, [100, 101], suite.FRAMES)
    assert [line for line in report.splitlines() if line.startswith("## ")] == [
        f"## Round {number}" for number in range(1, len(tune.ROUNDS) + 1)]


def test_runs_at_another_budget_get_the_budget_template_not_the_suites_reading(
        tmp_path: Path) -> None:
    """The suite's RESULTS.md text and hand-written reading speak of 163,840 frames: a table of
    runs at another budget (``suite.py --frames``) is written from the template that names its
    budget and has no reading."""
    own = tmp_path / "own"
    fake_run(suite.run_dir(own, "RepeatPreviousEasy", "lstm", 0), [(100, 0.5)],
             budget=suite.FRAMES, update=suite.FRAMES)
    assert aggregate.template_for(aggregate.collect(own)) == aggregate.TEMPLATE
    assert aggregate.template_for([]) == aggregate.TEMPLATE
    larger = tmp_path / "larger"
    fake_run(suite.run_dir(larger, "RepeatPreviousEasy", "lstm", 0), [(100, 0.5)],
             budget=2_048_000, update=2_048_000)
    out = tmp_path / "table"
    aggregate.main(["--runs", str(larger), "--out", str(out)])
    text = (out / "RESULTS.md").read_text()
    assert text.startswith("# POPGym at 2,048,000 frames a run")
    assert "five seeds (0–4), 2,048,000 frames per run" in text
    assert "163,840 frames per run" not in text and "What it says" not in text
    assert "| RepeatPreviousEasy | lstm | 1 | 2,048,000 | 0.500 |" in text

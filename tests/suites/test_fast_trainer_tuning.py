"""experiments/fast_trainer/tune.py: the rule of its TUNING.md, as :func:`choose` applies it."""

from __future__ import annotations

import json

from experiments.fast_trainer.tune import CANDIDATES, CAPS, OUTPUT, SPEED, choose, scores
from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.presets import PRESETS, Preset


def test_the_lowest_score_among_the_candidates_that_reached_the_threshold_wins() -> None:
    assert choose({"A": (50.0, 900.0, False), "B": (100.0, 300.0, True),
                   "C": (80.0, 400.0, True)}) == "C"


def test_scores_within_ten_percent_go_to_fewer_frames() -> None:
    assert choose({"B": (100.0, 300.0, True), "C": (95.0, 400.0, True)}) == "B"
    assert choose({"B": (100.0, 300.0, True), "C": (85.0, 400.0, True)}) == "C"


def test_without_an_eligible_candidate_all_are_scored_and_none_finished_is_none() -> None:
    assert choose({"A": (50.0, 900.0, False), "B": (60.0, 950.0, False)}) == "A"
    assert choose({}) is None


def test_the_fast_preset_holds_the_candidate_the_committed_runs_choose() -> None:
    speed = json.loads(SPEED.read_text())
    chosen = choose(scores(speed["fps"], list(CAPS)))
    assert chosen is not None
    fast = PRESETS[Preset.fast]
    shape = {key: getattr(fast, key) for key in ("num_envs", "frames_per_env", "epochs",
                                                 "batch_size")}
    # the preset leaves lr to PPOConfig's default, which every candidate but F-H kept
    assert {**shape, "lr": PPOConfig().lr} == vars(CANDIDATES[chosen])
    assert f"Chosen: **{chosen}**." in OUTPUT.read_text()

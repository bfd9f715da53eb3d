"""What a training run says (issue 31, items 2 and 5): that it resumed and where from, a true
mismatch message with a safe remedy, and a summary with the next command; in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_runner import TINY_PPO
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from rlmem.runs import CheckpointMismatchError
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs
from rlmem.train import summary, train


def _config(run_dir: Path, *overrides: str) -> DictConfig:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("train", overrides=[*TINY_PPO, f"run_dir={run_dir}", *overrides])


def _train(cfg: DictConfig) -> None:
    train(cfg, Path(cfg.run_dir))


def test_a_run_says_it_resumed_sums_up_and_refuses_another_config_truthfully(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = tmp_path / "run"
    first = _config(run_dir, "frames=32")
    _train(first)
    said = summary(first, run_dir)
    assert said.startswith("Trained 32 frames") and str(run_dir) in said
    assert f"python -m rlmem.evaluate run={run_dir} env=transfer episodes=100` (on " \
           "DoorKey-16x16)" in said
    assert "resuming" not in capsys.readouterr().out

    _train(_config(run_dir, "frames=64"))
    assert f"resuming {run_dir} at frames 32 (of frames=64)" in capsys.readouterr().out

    # A run of other settings in the same folder (made minutes ago, by this rlmem).
    with pytest.raises(CheckpointMismatchError) as caught:
        _train(_config(run_dir, "frames=96", "grid_encoding=raw"))
    message = str(caught.value)
    assert "grid_encoding: checkpoint has 'embedding', this run has 'raw'" in message
    # A raw grid has no embedding to fold, so the run decided agent.folded_grid off too.
    assert "agent.folded_grid: checkpoint has True, this run has False" in message
    assert "Resume it with agent.folded_grid=true grid_encoding=embedding" in message
    assert f"resume=false, which moves the earlier run (its checkpoint, config.yaml, " \
           f"progress.csv, tb/ and eval/) into {run_dir}/previous/<time>/" in message
    assert "another run_dir=" in message
    for untrue in ("older", "written before", "does not record"):
        assert untrue not in message

    # resume=false moves the earlier run aside, TensorBoard events with it.
    _train(_config(run_dir, "frames=32", "grid_encoding=raw", "resume=false"))
    moved = list((run_dir / "previous").iterdir())
    assert len(moved) == 1 and list((moved[0] / "tb").glob("events.out.tfevents.*"))
    assert (moved[0] / "checkpoint.pt").is_file() and (run_dir / "checkpoint.pt").is_file()


def test_the_rounding_notice_is_said_only_where_it_matters() -> None:
    """The default 300,000 frames in updates of 16 × 128 is 301,056 frames: said nothing;
    frames=100 trains 2,048: said."""
    from rlmem.agents.ppo.presets import PRESETS, Preset
    from rlmem.agents.run import frames_to_train, rounding_notice
    from rlmem.schema.train import TrainConfig

    defaults, minigrid = TrainConfig(), PRESETS[Preset.minigrid]
    update = minigrid.num_envs * minigrid.frames_per_env
    assert rounding_notice(defaults.frames, update, "16 × 128") is None
    assert rounding_notice(4096, update, "16 × 128") is None  # whole
    assert frames_to_train(4096, update) == 4096 and frames_to_train(4097, update) == 6144
    assert rounding_notice(100, update, "16 × 128") == (
        "frames=100 is not a whole number of updates of 16 × 128: training 2048 frames "
        "(1 update).")


def test_an_update_that_minibatches_do_not_divide_is_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two envs × 16 frames in chunks of 8 are four chunks: minibatches of 24 frames (three
    chunks) leave one of 8 frames at the end of each epoch; minibatches of 16 divide them."""
    _train(_config(tmp_path / "uneven", "frames=32", "agent.batch_size=24"))
    assert ("num_envs=2 × agent.frames_per_env=16 = 32 frames an update is not a whole number "
            "of minibatches of agent.batch_size=24: each epoch ends with a minibatch of 8 "
            "frames.") in capsys.readouterr().out
    _train(_config(tmp_path / "even", "frames=32"))
    assert "minibatches" not in capsys.readouterr().out

"""The commands rlmem prints to run next survive the shell and Hydra: a run directory whose
default name carries its settings (``gru,flush_denormal=true``) is quoted so that the printed
``python -m rlmem.evaluate run=...`` runs when pasted."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from cli_runner import TINY_PPO, run_cli
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from rlmem.schema.memory import CONF_DIR
from rlmem.schema.shell_override import override
from rlmem.schema.train import register_train_configs
from rlmem.train import summary
from rlmem.train import train as train_run


@pytest.mark.parametrize("value", [
    "runs/ppo/DoorKey-5x5/relstm/seed0", "runs/ppo/CartPole-v1/gru,flush_denormal=true/seed0",
    "my runs/seed0", "it's/here", "a\\'b", "a\\\\'b", "costs $5/run", "x${y}z", 'say "hi"',
    "back\\slash", "[1,2]", "a:b@c%d+e"])
def test_the_value_comes_back_through_the_shell_and_hydra(value: str) -> None:
    argument = override("run", value)
    [typed] = shlex.split(argument)
    [parsed] = OverridesParser.create().parse_overrides([typed])
    assert parsed.key_or_group == "run"
    assert OmegaConf.create({"run": parsed.value()}).run == value


def test_a_plain_value_is_printed_as_it_is() -> None:
    assert override("run", "runs/ppo/DoorKey-5x5/relstm/seed0") == \
        "run=runs/ppo/DoorKey-5x5/relstm/seed0"
    assert override("run", "runs/x,y=z/seed0") == "\"run='runs/x,y=z/seed0'\""


def test_the_evaluation_a_run_suggests_runs_from_a_folder_named_by_its_settings(
        tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "gru,grid_encoding=raw" / "seed0"
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=[*TINY_PPO, "frames=32", "memory=gru",
                                          "memory.hidden_size=8", "grid_encoding=raw",
                                          *shlex.split(override("run_dir", str(run_dir)))])
    assert cfg.run_dir == str(run_dir)
    train_run(cfg, run_dir)
    said = summary(cfg, run_dir)
    found = re.search(r"`python -m rlmem\.evaluate (.*?)`", said)
    assert found is not None, said
    arguments = shlex.split(found.group(1))
    arguments[arguments.index("episodes=100")] = "episodes=1"
    result = run_cli("rlmem.evaluate", *arguments, "num_envs=1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"Evaluated {run_dir} on DoorKey-16x16" in result.stdout
    assert f"`python -m rlmem.evaluate {override('run', str(run_dir))} env=DoorKey-16x16" in \
        result.stdout

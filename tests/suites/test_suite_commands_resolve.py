"""Every training command an RL suite plans is one ``python -m rlmem.train`` takes: through
its front door (Hydra's folder keys, unknown keys), as one run and as a sweep's job (how the
suites run it), and its config checks (every value, the decided agent against its env), as a
run would before any work. A suite's command that the trainer refuses fails only when the
suite reaches it, maybe hours into a sitting: the authors'-code recipes of issue 58 were refused
so for most of a day (a ``hydra.sweep.subdir`` beside the suite's ``run_dir``). Each suite's
``--dry-run`` gives its commands; one seed each."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from experiments.memory import suite as memory_suite
from experiments.popgym import suite as popgym_suite
from experiments.transfer import kerg2020_code
from experiments.transfer import suite as transfer_suite
from rlmem.schema.command_line import front_door
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs, resolve
from rlmem.train import LINE

SUITES: dict[str, tuple[Callable[[Sequence[str]], int], list[str]]] = {
    "memory": (memory_suite.main, ["--seeds", "1"]),
    "popgym": (popgym_suite.main, ["--seeds", "0"]),
    "transfer": (transfer_suite.main, ["--seeds", "0"]),
    "kerg2020_code": (kerg2020_code.main, ["--seeds", "0"]),
}
"""Each RL suite's entry point and the arguments that plan one seed of each of its runs."""


def planned_commands(suite: str, runs: Path, capsys: pytest.CaptureFixture[str]
                     ) -> list[list[str]]:
    """The arguments of every ``python -m rlmem.train`` the dry run of ``suite`` prints
    (a finished run's commented out too)."""
    main, arguments = SUITES[suite]
    assert main(["--dry-run", "--runs", str(runs), *arguments]) == 0
    prefix = ["python", "-m", "rlmem.train"]
    commands = [shlex.split(line.removeprefix("# "))
                for line in capsys.readouterr().out.splitlines()]
    return [command[len(prefix):] for command in commands if command[:len(prefix)] == prefix]


@pytest.mark.parametrize("suite", list(SUITES))
def test_every_planned_training_command_is_taken_by_the_trainer(
        suite: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    commands = planned_commands(suite, tmp_path / "runs", capsys)
    assert commands, f"the {suite} suite's dry run planned no training"
    register_train_configs()
    refused = {}
    for arguments in commands:
        try:
            # As a sweep's job too, which is how the suites run it (-m, their run_dir given).
            front_door(LINE, ["-m", *arguments])
            taken = front_door(LINE, arguments)  # composes a recipe's files itself
            with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
                resolve(compose("train", overrides=taken))
        except SystemExit:  # the front door's refusal, one paragraph on stderr
            refused[shlex.join(arguments)] = capsys.readouterr().err.strip()
        except Exception as error:  # every refused command is reported, not the first
            refused[shlex.join(arguments)] = f"{type(error).__name__}: {error}"
    assert not refused, "\n".join(f"{command}\n  {why}" for command, why in refused.items())
    assert not (tmp_path / "runs").exists()  # planned and checked, nothing written

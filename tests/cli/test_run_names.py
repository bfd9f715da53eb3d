"""Default run folders (issue 31, item 1): runs of other tasks, presets or settings never share
one, and the same command always finds its own."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run_cli
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser

from rlmem.schema.memory import CONF_DIR
from rlmem.schema.run_names import existing_run_dir, folder_settings, legacy_name
from rlmem.schema.supervised import register_supervised_configs
from rlmem.schema.train import NAMING as TRAIN_NAMING
from rlmem.schema.train import register_train_configs


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    register_train_configs()
    register_supervised_configs()
    yield
    HydraConfig.instance().cfg = None


def run_dir(config: str, *overrides: str, as_cli: bool = True) -> str:
    """The default run_dir of ``python -m rlmem.<config> overrides...``; ``as_cli``: as the
    Hydra application resolves it (with its group choices and command line)."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose(config, overrides=list(overrides), return_hydra_config=as_cli)
    if as_cli:
        HydraConfig.instance().set_config(cfg)
    try:
        return str(cfg.run_dir)
    finally:
        HydraConfig.instance().cfg = None


def test_default_settings_keep_their_folder() -> None:
    assert run_dir("train") == "runs/ppo/DoorKey-5x5/lstm/seed0"
    assert run_dir("train", as_cli=False) == "runs/ppo/DoorKey-5x5/lstm/seed0"
    assert run_dir("supervised", "memory=relstm") == "runs/supervised/copy/relstm_T100_seed0"
    # A value equal to its default is the default run.
    assert run_dir("train", "memory.hidden_size=64", "agent.lr=0.001") == \
        "runs/ppo/DoorKey-5x5/lstm/seed0"


def test_supervised_tasks_presets_and_settings_do_not_collide() -> None:
    copy = run_dir("supervised", "memory=relstm", "memory.hidden_size=128")
    transfer = run_dir("supervised", "task=transfer_copy", "memory=relstm",
                       "memory.hidden_size=128")
    preset = run_dir("supervised", "+preset=kerg2020_table1_transfer_copy_relstm")
    on_top = run_dir("supervised", "+preset=kerg2020_table1_transfer_copy_relstm",
                     "memory.hidden_size=64", "seed=1")
    assert copy == "runs/supervised/copy/relstm_T100+memory.hidden_size-128_seed0"
    assert transfer == "runs/supervised/transfer_copy/relstm_T100+memory.hidden_size-128_seed0"
    assert preset == "runs/supervised/transfer_copy/kerg2020_table1_transfer_copy_relstm_T100_seed0"
    assert on_top == ("runs/supervised/transfer_copy/kerg2020_table1_transfer_copy_relstm_T100+"
                      "memory.hidden_size-64_seed1")
    # Outside a Hydra application (the compose API) they differ too.
    assert len({run_dir("supervised", *args, as_cli=False) for args in [
        ("memory=relstm",), ("task=transfer_copy", "memory=relstm"),
        ("+preset=kerg2020_table1_transfer_copy_relstm",), ("memory=relstm", "lr=1e-3")]}) == 4


def test_train_envs_cells_agents_and_settings_do_not_collide() -> None:
    folders = [run_dir("train", *args) for args in [
        (), ("env=MemoryS7",), ("memory=relstm",), ("agent=sb3",), ("grid_encoding=raw",),
        ("num_envs=8",), ("+env_kwargs.max_steps=100",), ("memory.hidden_size=128",),
        ("agent.lr=5e-4",), ("direction=true",), ("+recipe=memory_transfer",),
        ("+recipe=memory_transfer", "memory.hidden_size=128")]]
    assert len(set(folders)) == len(folders), folders
    assert "runs/ppo/DoorKey-5x5/lstm+grid_encoding-raw/seed0" in folders
    assert "runs/ppo/MemoryS7/lstm_memory_transfer+memory.hidden_size-128/seed0" in folders
    # The budget is no part of the name: raising frames resumes the run.
    assert run_dir("train", "frames=1000000") == "runs/ppo/DoorKey-5x5/lstm/seed0"


def test_a_value_no_folder_can_show_gets_a_hash() -> None:
    name = folder_settings({"wrappers": [{"target": "a:B"}], "grid_encoding": "raw"})
    other = folder_settings({"wrappers": [{"target": "a:C"}], "grid_encoding": "raw"})
    assert name.startswith("grid_encoding-raw+wrappers+") and name != other
    long = folder_settings({f"agent.key{index}": index for index in range(30)})
    assert len(long) < 110 and long != folder_settings({f"agent.key{index}": index + 1
                                                  for index in range(30)})


def test_the_names_cover_every_key_a_resume_compares() -> None:
    """Keys that decide whether a checkpoint may be resumed must tell runs apart."""
    from rlmem.agents.run import RESUME_SECTIONS as TRAIN
    from rlmem.schema.supervised import NAMING as SUPERVISED
    from rlmem.supervised import RESUME_SECTIONS as TASKS

    assert set(TRAIN) - set(TRAIN_NAMING.keys) == {"env", "seed"}
    assert set(TASKS) - set(SUPERVISED.keys) == {"seq_len", "seed"}


def test_names_hold_nothing_a_shell_or_hydra_reads() -> None:
    """Every default folder, with settings, a hash or a preset, is plain: pasted unquoted as
    ``run=<folder>`` it parses back to itself, and bash's completion does not split it."""
    folders = [run_dir("train", *args) for args in [
        ("grid_encoding=raw", "memory.hidden_size=128"), ("+env_kwargs.max_steps=100",),
        ("agent.lr=5e-4",), ("+recipe=memory_transfer", "memory.hidden_size=128"),
        ("transfer_env=DoorKey-16x16",)]]
    folders += [run_dir("supervised", *args) for args in [
        ("memory=relstm", "lr=1e-3"), ("task=transfer_copy", "eval_seq_lens=[200,400]"),
        ("+preset=kag2021_grid_lr1e-3_adding_tarnn_T200", "seed=3")]]
    folders.append(folder_settings({"wrappers": [{"target": "a:B"}], "a": "x+y"}))
    for folder in folders:
        assert re.fullmatch(r"[\w./+-]+", folder), folder
        [parsed] = OverridesParser.create().parse_overrides([f"run={folder}"])
        assert parsed.value() == folder


def test_an_older_name_is_found_and_kept(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A run that an earlier rlmem named with ``,`` and ``=`` is resumed where it is."""
    new = tmp_path / "ppo" / "DoorKey-5x5" / "relstm+grid_encoding-raw+agent.lr-0.0005" / "seed0"
    old = tmp_path / "ppo" / "DoorKey-5x5" / "relstm,grid_encoding=raw,agent.lr=0.0005" / "seed0"
    assert legacy_name(new.parent.name) == old.parent.name
    assert legacy_name("relstm_T100+memory.hidden_size-128_seed0") == \
        "relstm_T100,memory.hidden_size=128_seed0"
    assert existing_run_dir(new) == new  # neither exists: the new name
    old.mkdir(parents=True)
    assert existing_run_dir(new) == old
    assert f"the run is in {old}" in capsys.readouterr().out
    new.mkdir(parents=True)
    assert existing_run_dir(new) == new  # both: the new one


def test_the_same_command_resumes_a_run_of_an_older_name(tmp_path: Path) -> None:
    args = ["task=copy", "seq_len=10", "iterations=10", "lr=1e-3", "memory.hidden_size=8",
            "batch_size=8", "eval_batch_size=8", "progress_bar=false", "figures=false"]
    first = run_cli("rlmem.supervised", *args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    new = tmp_path / "runs" / "supervised" / "copy" / \
        "lstm_T10+batch_size-8+lr-0.001+memory.hidden_size-8_seed0"
    assert new.is_dir(), list((tmp_path / "runs" / "supervised" / "copy").iterdir())
    old = new.parent / legacy_name(new.name)
    new.rename(old)
    again = run_cli("rlmem.supervised", *[*args[:2], "iterations=20", *args[3:]], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"the run is in {Path('runs/supervised/copy') / old.name}" in again.stdout
    assert "finished 20 iterations" in again.stdout and not new.exists()

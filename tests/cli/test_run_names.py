"""Default run folders (issue 31, item 1): runs of other tasks, presets or settings never share
one, and the same command always finds its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig

from rlmem.schema.memory import CONF_DIR
from rlmem.schema.run_names import describe
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
    assert copy == "runs/supervised/copy/relstm_T100,memory.hidden_size=128_seed0"
    assert transfer == "runs/supervised/transfer_copy/relstm_T100,memory.hidden_size=128_seed0"
    assert preset == "runs/supervised/transfer_copy/kerg2020_table1_transfer_copy_relstm_T100_seed0"
    assert on_top == ("runs/supervised/transfer_copy/kerg2020_table1_transfer_copy_relstm_T100,"
                      "memory.hidden_size=64_seed1")
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
    assert "runs/ppo/DoorKey-5x5/lstm,grid_encoding=raw/seed0" in folders
    assert "runs/ppo/MemoryS7/lstm_memory_transfer,memory.hidden_size=128/seed0" in folders
    # The budget is no part of the name: raising frames resumes the run.
    assert run_dir("train", "frames=1000000") == "runs/ppo/DoorKey-5x5/lstm/seed0"


def test_a_value_no_folder_can_show_gets_a_hash() -> None:
    name = describe({"wrappers": [{"target": "a:B"}], "grid_encoding": "raw"})
    other = describe({"wrappers": [{"target": "a:C"}], "grid_encoding": "raw"})
    assert name.startswith("grid_encoding=raw,wrappers,") and name != other
    long = describe({f"agent.key{index}": index for index in range(30)})
    assert len(long) < 110 and long != describe({f"agent.key{index}": index + 1
                                                  for index in range(30)})


def test_the_names_cover_every_key_a_resume_compares() -> None:
    """Keys that decide whether a checkpoint may be resumed must tell runs apart."""
    from rlmem.agents.run import RESUME_SECTIONS as TRAIN
    from rlmem.schema.supervised import NAMING as SUPERVISED
    from rlmem.supervised import RESUME_SECTIONS as TASKS

    assert set(TRAIN) - set(TRAIN_NAMING.keys) == {"env", "seed"}
    assert set(TASKS) - set(SUPERVISED.keys) == {"seq_len", "seed"}

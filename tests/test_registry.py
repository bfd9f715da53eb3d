"""The registry, the typed configs, and their Hydra YAML files stay in sync."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from rlmem.cells import CELLS, cell_config, make_cell, make_cell_from_config
from rlmem.schema.memory import CONF_DIR, memory_yaml, register_memory_configs

SEED_CELLS = {"ernn", "gru", "irnn", "lstm", "memlstm", "relrnn", "relstm", "sarnn", "tarnn"}


def test_every_seed_cell_is_registered() -> None:
    assert set(CELLS) >= SEED_CELLS


def test_unknown_cell_lists_the_valid_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown cell 'relstn'.*relstm"):
        make_cell("relstn", input_size=3, hidden_size=4)


def test_unknown_hyperparameter_lists_the_valid_ones() -> None:
    with pytest.raises(TypeError, match=r"\['nu'\].*relevant, screening, short_term"):
        make_cell("relstm", input_size=3, hidden_size=4, nu=5)


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_bad_sizes_are_rejected(size: object) -> None:
    with pytest.raises(ValueError, match="positive int"):
        make_cell("lstm", input_size=3, hidden_size=size)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(CELLS))
def test_yaml_matches_the_typed_config(name: str) -> None:
    path = CONF_DIR / "memory" / f"{name}.yaml"
    assert path.exists(), f"run `python -m rlmem.schema.memory` to write {path}"
    assert path.read_text() == memory_yaml(name)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_hydra_composes_each_memory_config_into_a_cell(name: str) -> None:
    register_memory_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(overrides=[f"+memory={name}"])
    assert OmegaConf.to_container(cfg.memory) == {
        key: getattr(cell_config(name)(), key) for key in cfg.memory}
    cell = make_cell_from_config(cfg.memory, input_size=5)
    assert cell.name == name and cell.input_size == 5


def test_hydra_rejects_a_wrong_type_or_unknown_key() -> None:
    register_memory_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        with pytest.raises(ConfigCompositionException, match="short_term"):
            compose(overrides=["+memory=relstm", "memory.short_term=five"])
        with pytest.raises(ConfigCompositionException, match="nu"):
            compose(overrides=["+memory=relstm", "memory.nu=5"])

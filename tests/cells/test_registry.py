"""The registry: where cells come from, what registration checks, and the typed configs Hydra
stores for them."""

from __future__ import annotations

from typing import Annotated, Any, NamedTuple

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf
from torch import Tensor

from rlmem.cells import (
    CELLS,
    Cell,
    Dims,
    cell_config,
    full_attention,
    make_cell,
    make_cell_from_config,
    register,
)
from rlmem.schema.memory import CONF_DIR, MEMORY_GROUP, register_memory_configs

SEED_CELLS = {"ernn", "gru", "irnn", "lstm", "memlstm", "relrnn", "relstm", "sarnn", "tarnn"}


def test_every_seed_cell_is_registered() -> None:
    assert set(CELLS) >= SEED_CELLS


def test_unknown_cell_lists_the_valid_ones() -> None:
    with pytest.raises(KeyError, match=r"unknown cell 'relstn'.*relstm"):
        make_cell("relstn", input_size=3, hidden_size=4)


def test_unknown_hyperparameter_lists_the_valid_ones() -> None:
    with pytest.raises(TypeError, match=r"\['nu'\].*relevant, reset_rule, screening, short_term"):
        make_cell("relstm", input_size=3, hidden_size=4, nu=5)


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_bad_sizes_are_rejected(size: object) -> None:
    with pytest.raises(ValueError, match="positive int"):
        make_cell("lstm", input_size=3, hidden_size=size)  # type: ignore[arg-type]


def test_every_builtin_cell_lives_in_the_file_named_after_it() -> None:
    for name, cls in CELLS.items():
        if cls.__module__.startswith("rlmem.cells."):
            assert cls.__module__ == f"rlmem.cells.{name}", (name, cls.__module__)


def test_the_memory_group_holds_exactly_the_typed_config_of_each_cell() -> None:
    register_memory_configs()
    group = ConfigStore.instance().repo[MEMORY_GROUP]
    assert set(group) == {f"{name}.yaml" for name in CELLS}
    for name in CELLS:
        stored = OmegaConf.to_container(group[f"{name}.yaml"].node)
        assert stored == OmegaConf.to_container(OmegaConf.structured(cell_config(name)))
    assert not (CONF_DIR / MEMORY_GROUP).exists()  # no YAML files to keep in sync


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


# --- what registration checks -------------------------------------------------------------------

class _ToyState(NamedTuple):
    h: Annotated[Tensor, Dims("hidden_size")]


def _toy_cell(init_source: str, state_type: type = _ToyState) -> type[Cell]:
    """A cell class whose ``__init__`` is ``init_source`` (a signature with ``pass``)."""
    namespace: dict[str, Any] = {}
    exec(f"def __init__{init_source}: pass", {"Any": Any}, namespace)

    def step(self: Cell, x_t: Tensor, state: Any) -> tuple[Tensor, Any, dict[str, Tensor]]:
        return x_t, state, {}

    return type("Toy", (Cell,), {"__init__": namespace["__init__"], "state_type": state_type,
                                 "step": step, "__module__": __name__})


@pytest.mark.parametrize(("signature", "error", "message"), [
    ("(self, input_size: int, hidden_size: int, k: int = 1)", TypeError,
     r"cell 'toy': hyperparameter 'k' must be keyword-only"),
    ("(self, input_size: int, hidden_size: int, *, k=1)", TypeError,
     r"cell 'toy': hyperparameter 'k' needs a type annotation and a default"),
    ("(self, input_size: int, hidden_size: int, *, k: int)", TypeError,
     r"cell 'toy': hyperparameter 'k' needs a type annotation and a default"),
    ("(self, input_size: int, hidden_size: int, *, k: int = 'x')", TypeError,
     r"cell 'toy': hyperparameter 'k': its type int or default 'x' does not fit"),
    ("(self, input_size: int, hidden_size: int, *, k: Any = object())", TypeError,
     r"cell 'toy': hyperparameter 'k'.*does not fit a typed config"),
    ("(self, input_size: int, hidden_size: int, **options: int)", TypeError,
     r"cell 'toy': __init__ takes \*\*options"),
    ("(self, input_size: int, hidden_size: int, *, dropout: float = 0.0)", ValueError,
     r"cell 'toy': hyperparameter 'dropout' is reserved"),
    ("(self, input_size: int, hidden_size: int, *, name: str = 'x')", ValueError,
     r"cell 'toy': hyperparameter 'name' is reserved"),
    ("(self, hidden_size: int, input_size: int)", TypeError,
     r"cell 'toy': Toy.__init__ must start with \(self, input_size, hidden_size, \*"),
])
def test_registration_rejects_a_signature_the_config_cannot_follow(
        signature: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        register("toy")(_toy_cell(signature))
    assert "toy" not in CELLS


class _UndeclaredState(NamedTuple):
    h: Tensor


class _MissizedState(NamedTuple):
    h: Annotated[Tensor, Dims("capacity", "hidden_size")]


@pytest.mark.parametrize(("state_type", "message"), [
    (_UndeclaredState, r"cell 'toy': _UndeclaredState.h: declare its shape once"),
    (_MissizedState, r"cell 'toy': state field 'h' is sized by \['capacity'\], which name no "
                     r"argument"),
    (tuple, r"cell 'toy': a cell's state_type must be a NamedTuple class"),
])
def test_registration_rejects_a_state_without_its_dims(state_type: type, message: str) -> None:
    signature = "(self, input_size: int, hidden_size: int, *, k: int = 1)"
    with pytest.raises(TypeError, match=message):
        register("toy")(_toy_cell(signature, state_type))
    assert "toy" not in CELLS


@pytest.mark.parametrize("signature", [
    "(self, input_size: int, hidden_size: int, *, k: int = 1)",
    "(self, input_size: int, hidden_size: int, *, capacity: float = 1.0)",
])
def test_an_episode_bound_must_be_an_int_hyperparameter(signature: str) -> None:
    toy = _toy_cell(signature)
    toy.episode_bound = "capacity"
    with pytest.raises(TypeError, match=r"cell 'toy': episode_bound='capacity' names no int "
                                        "hyperparameter of Toy.__init__"):
        register("toy")(toy)
    assert "toy" not in CELLS


def test_full_attention_raises_only_a_bound_below_the_episode() -> None:
    """The eval_memory of an evaluation on episodes of up to ``steps`` steps: MemLSTM's
    capacity (its default 256 when the config leaves it out) raised where it is lower; nothing
    for cells without a bound, for unknown step limits or names."""
    assert full_attention({"name": "memlstm", "capacity": 256}, 2560) == {"capacity": 2560}
    assert full_attention({"name": "memlstm"}, 300) == {"capacity": 300}
    assert full_attention({"name": "memlstm", "capacity": 256}, 250) == {}
    assert full_attention({"name": "memlstm", "capacity": 256}, None) == {}
    assert full_attention({"name": "relstm"}, 2560) == {}
    assert full_attention({"name": "sb3_lstm"}, 2560) == {}
    assert [name for name, cell in CELLS.items() if cell.episode_bound] == ["memlstm"]


@pytest.mark.parametrize("name", ["my-cell", "a b", "", "memory/x"])
def test_a_cell_name_must_be_an_identifier(name: str) -> None:
    with pytest.raises(ValueError, match="must be an identifier"):
        register(name)(_toy_cell("(self, input_size: int, hidden_size: int)"))


@pytest.mark.parametrize("name", sorted(CELLS))
def test_state_shapes_come_from_the_state_declaration(name: str) -> None:
    cell = make_cell(name, input_size=3, hidden_size=4)
    shapes = cell.state_shapes()
    assert tuple(shapes) == cell.state_type._fields
    state = cell.initial_state(2, dtype=torch.float64)
    for key, (shape, dtype) in shapes.items():
        value = getattr(state, key)
        assert value.shape == (2, *shape) and value.dtype == (dtype or torch.float64)

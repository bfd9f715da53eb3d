"""Stacked cells: what a stack adds to the contract (``tests/cells/test_cells.py`` runs the contract
itself on two-layer stacks)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hydra import compose, initialize_config_dir

from rlmem.cells import Stacked, make_cell, make_cell_from_config
from rlmem.cells.gru import GRU
from rlmem.cells.lstm import LSTM
from rlmem.cells.sarnn import SARNN
from rlmem.schema.memory import CONF_DIR, register_memory_configs

T, B, IN, H = 9, 3, 5, 6


def inputs(seed: int = 1) -> torch.Tensor:
    return torch.randn(T, B, IN, generator=torch.Generator().manual_seed(seed))


def test_one_layer_is_the_plain_cell_unchanged() -> None:
    torch.manual_seed(0)
    plain = make_cell("relstm", input_size=IN, hidden_size=H)
    torch.manual_seed(0)
    one = make_cell("relstm", input_size=IN, hidden_size=H, num_layers=1)
    assert type(one) is type(plain)
    assert one.state_dict().keys() == plain.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(one.state_dict().values(),
                                                 plain.state_dict().values(), strict=True))


def test_a_stack_is_its_layers_run_one_after_the_other() -> None:
    torch.manual_seed(0)
    stack = make_cell("relstm", input_size=IN, hidden_size=H, num_layers=3, short_term=2,
                      relevant=2)
    assert isinstance(stack, Stacked) and stack.num_layers == 3
    assert [layer.input_size for layer in stack.layers] == [IN, H, H]
    assert stack.output_size == H and stack.hidden_size == H
    x = inputs()
    resets = torch.rand(T, B, generator=torch.Generator().manual_seed(2)) < 0.3
    y, state = stack(x, None, resets)
    expected, fields = x, {}
    for index, layer in enumerate(stack.layers):
        expected, layer_state = layer(expected, None, resets)
        fields.update({f"l{index}_{key}": value
                       for key, value in zip(layer_state._fields, layer_state, strict=True)})
    torch.testing.assert_close(y, expected, rtol=0, atol=0)
    assert state._fields == tuple(fields)
    for key, value in zip(state._fields, state, strict=True):
        assert torch.equal(value, fields[key]), key


def test_state_is_one_flat_namedtuple_shared_by_equal_stacks() -> None:
    stack = make_cell("lstm", input_size=IN, hidden_size=H, num_layers=2)
    other = make_cell("lstm", input_size=IN + 1, hidden_size=H, num_layers=2)
    assert stack.state_type is other.state_type  # the actor's state fits the critic's cell
    assert stack.state_type._fields == ("l0_h", "l0_c", "l1_h", "l1_c")
    assert dict(stack.state_shapes()) == {key: ((H,), None) for key in stack.state_type._fields}
    state = stack.initial_state(4)
    assert all(value.shape == (4, H) and not value.any() for value in state)
    assert stack.state_size() == 4 * H


def test_a_reset_re_initialises_every_layer() -> None:
    stack = make_cell("gru", input_size=IN, hidden_size=H, num_layers=2)
    _, mid = stack(inputs(1))
    assert all(value.abs().min() > 0 for value in mid)
    resets = torch.zeros(T, B, dtype=torch.bool)
    resets[0, 1] = True
    _, after_reset = stack(inputs(2), mid, resets)
    _, fresh = stack(inputs(2)[:, 1:2])
    for key, value, want in zip(after_reset._fields, after_reset, fresh, strict=True):
        torch.testing.assert_close(value[1:2], want, rtol=0, atol=1e-6, msg=key)


def test_layers_may_differ() -> None:
    stack = Stacked([LSTM(IN, H), GRU(H, 4)])
    assert stack.state_type._fields == ("l0_h", "l0_c", "l1_h")
    y, _ = stack(inputs())
    assert y.shape == (T, B, 4) and stack.output_size == 4
    with pytest.raises(ValueError, match="layer 1 has input_size 5 but layer 0 outputs 6"):
        Stacked([LSTM(IN, H), GRU(IN, H)])


def test_dropout_acts_between_layers_in_training_only() -> None:
    torch.manual_seed(0)
    stack = make_cell("lstm", input_size=IN, hidden_size=H, num_layers=2, dropout=0.5)
    assert isinstance(stack, Stacked)
    torch.manual_seed(0)
    plain = make_cell("lstm", input_size=IN, hidden_size=H, num_layers=2)
    x = inputs()
    stack.eval()
    torch.testing.assert_close(stack(x)[0], plain(x)[0], rtol=0, atol=0)
    stack.train()
    torch.manual_seed(3)
    y, _ = stack(x)
    assert not torch.allclose(y, plain(x)[0])
    # Never after the last layer: an LSTM output is never exactly 0, a dropped one would be.
    assert (y != 0).all()
    # Between the layers: layer 1 saw the dropped-out output of layer 0, scaled by 1/(1-p).
    torch.manual_seed(3)
    below, _ = stack.layers[0](x)
    dropped = torch.nn.functional.dropout(below, 0.5, training=True)
    assert (dropped == 0).any()
    torch.testing.assert_close(y, stack.layers[1](dropped)[0], rtol=0, atol=0)
    assert "dropout=0.5" in repr(stack)


def test_aux_losses_diagnostics_and_anneal_reach_every_layer() -> None:
    stack = make_cell("sarnn", input_size=IN, hidden_size=H, num_layers=2, lam=0.1)
    assert isinstance(stack, Stacked)
    bottom, top = stack.layers
    assert isinstance(bottom, SARNN) and isinstance(top, SARNN)
    out = stack.forward_aux(inputs())
    assert set(out.aux.losses) == {"l0_budget", "l1_budget"}
    assert {"l0_skip_percent", "l1_skip_percent"} <= set(out.aux.diagnostics)
    assert {"l0_update", "l1_update"} <= set(out.aux.traces)
    # Each layer's terms are those of the layer run alone on its own input.
    below = bottom.forward_aux(inputs())
    above = top.forward_aux(below.output)
    torch.testing.assert_close(out.aux.losses["l0_budget"], below.aux.losses["budget"])
    torch.testing.assert_close(out.aux.losses["l1_budget"], above.aux.losses["budget"])
    torch.testing.assert_close(out.aux.total_loss(),
                               below.aux.total_loss() + above.aux.total_loss())
    stack.anneal(1.0)
    assert all(float(layer.slope) > 1.0 for layer in (bottom, top))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"num_layers": 0}, "num_layers must be an int >= 1, got 0"),
    ({"num_layers": 1.5}, "num_layers must be an int >= 1"),
    ({"num_layers": True}, "num_layers must be an int >= 1"),
    ({"num_layers": 2, "dropout": 1.0}, r"dropout must be a float in \[0, 1\), got 1.0"),
    ({"num_layers": 2, "dropout": -0.1}, r"dropout must be a float in \[0, 1\)"),
])
def test_bad_stacking_arguments_are_rejected(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_cell("lstm", input_size=IN, hidden_size=H, **kwargs)


def test_dropout_without_a_second_layer_warns() -> None:
    with pytest.warns(UserWarning, match="no effect with num_layers=1"):
        cell = make_cell("gru", input_size=IN, hidden_size=H, dropout=0.2)
    assert isinstance(cell, GRU)


def test_hydra_memory_config_stacks() -> None:
    register_memory_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(overrides=["+memory=relstm", "memory.num_layers=2", "memory.dropout=0.1"])
    cell = make_cell_from_config(cfg.memory, input_size=IN)
    assert isinstance(cell, Stacked) and cell.num_layers == 2 and cell.dropout == 0.1
    assert all(layer.name == "relstm" for layer in cell.layers)

"""The recipe memory needs (issue: memory that learns): the grid encoding and the gate biases.

- the grid encoder separates every object, colour and state index, in our PPO and in sb3;
- ``forget_bias`` reaches every LSTM inside a cell, ``update_bias`` every GRU.

A run written before either existed is migrated once (``tests/test_migrate.py``).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from gymnasium import spaces
from hydra import compose, initialize_config_dir
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX
from minigrid.minigrid_env import MiniGridEnv
from torch import nn

from rlmem.agents.minigrid_encoders import GRID_ENCODINGS, ImageEncoder
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.sb3 import MiniGridExtractor
from rlmem.agents.sb3.train import build_model
from rlmem.cells import CELLS, hyperparameters, make_cell
from rlmem.cells.gate_bias import GRU_UPDATE_GATE, LSTM_FORGET_GATE
from rlmem.envs import make_env
from rlmem.schema.memory import CONF_DIR
from rlmem.schema.train import register_train_configs, resolve

CHANNELS = {"object": (0, OBJECT_TO_IDX), "colour": (1, COLOR_TO_IDX), "state": (2, STATE_TO_IDX)}


@pytest.mark.parametrize("encoding", [e for e in GRID_ENCODINGS if e != "raw"])
@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_the_grid_encoder_separates_every_index(encoding: str, channel: str) -> None:
    """Changing one cell's index changes its features by a clear margin, for every pair of
    values of every channel (raw floats make key 5 and ball 6 neighbours; these do not)."""
    torch.manual_seed(0)
    encoder = ImageEncoder((7, 7, 3), encoding)
    position, values = CHANNELS[channel]
    images = torch.zeros(len(values), 7, 7, 3, dtype=torch.uint8)
    images[:, 3, 3, position] = torch.tensor(sorted(values.values()), dtype=torch.uint8)
    cell = encoder.grid_features(images)[:, :, 3, 3]  # (values, features)
    distances = torch.cdist(cell, cell)
    off_diagonal = distances[~torch.eye(len(values), dtype=torch.bool)]
    scale = cell.norm(dim=1).mean()
    assert off_diagonal.min() > 0.2 * scale, (channel, off_diagonal.min(), scale)


def test_an_encoding_other_than_raw_needs_minigrid_channels() -> None:
    with pytest.raises(ValueError, match=r"needs MiniGrid.s .* channels, got 4"):
        ImageEncoder((7, 7, 4), "embedding")
    with pytest.raises(ValueError, match="unknown grid encoding 'pixels'"):
        ImageEncoder((7, 7, 3), "pixels")
    assert ImageEncoder((7, 7, 4), "raw").output_size == 64


@pytest.mark.parametrize("view", [3, 5])
def test_a_small_view_is_placed_where_the_full_view_shows_the_same_cells(view: int) -> None:
    """MiniGrid's ``agent_view_size`` 3 or 5, padded by the encoder: every cell it shows sits
    where the 7×7 view of the same state shows that cell, and everything else is "unseen"
    (0, 0, 0). (The two views may differ in what they show: MiniGrid works out occlusion within
    each view, so the larger one can see round a wall the smaller one cannot.)"""
    env = make_env("MemoryS7", mission=False)
    grid = env.unwrapped
    assert isinstance(grid, MiniGridEnv)
    side = (7 - view) // 2
    rng = torch.Generator().manual_seed(0)
    encoder = ImageEncoder((view, view, 3), "raw")
    for episode in range(4):
        env.reset(seed=episode)
        for _ in range(12):
            env.step(int(torch.randint(3, (1,), generator=rng)))  # left, right, forward
            grid.agent_view_size = 7
            full = torch.as_tensor(grid.gen_obs()["image"]).float()
            grid.agent_view_size = view
            small = torch.as_tensor(grid.gen_obs()["image"])
            placed = encoder.grid_features(small[None])[0].permute(1, 2, 0)
            inside = torch.zeros(7, 7, dtype=torch.bool)
            inside[side:side + view, 7 - view:] = True
            assert torch.equal(placed[inside].view(view, view, 3), small.float())
            assert not placed[~inside].any()
            shown = placed.any(-1) & full.any(-1)
            assert shown.sum() > view and torch.equal(placed[shown], full[shown])
    assert ImageEncoder((view, view, 3)).output_size == 64
    assert "placed in a 7x7 view" in repr(encoder)


def test_a_view_smaller_than_7x7_must_be_square_and_odd() -> None:
    with pytest.raises(ValueError, match="square and odd-sized; got 4x4"):
        ImageEncoder((4, 4, 3))
    with pytest.raises(ValueError, match="got 3x5"):
        ImageEncoder((3, 5, 3))


@pytest.mark.parametrize("encoding", GRID_ENCODINGS)
def test_sb3_and_our_ppo_encode_the_grid_the_same_way(encoding: str) -> None:
    env = make_env("MemoryS7", mission=False)
    try:
        space = env.observation_space
        assert isinstance(space, spaces.Dict)
        torch.manual_seed(0)
        ours = ActorCritic(space, 3, {"name": "lstm", "hidden_size": 8},
                           grid_encoding=encoding).image
        assert isinstance(ours, ImageEncoder)
        theirs = MiniGridExtractor(space, grid_encoding=encoding).image
        theirs.load_state_dict(ours.state_dict())
        observation, _ = env.reset(seed=0)
        image = torch.as_tensor(observation["image"]).unsqueeze(0)
        assert ours.encoding == theirs.encoding == encoding
        torch.testing.assert_close(ours(image), theirs(image), rtol=0, atol=0)
    finally:
        env.close()


def test_the_sb3_trainer_builds_the_configured_encoding() -> None:
    register_train_configs()
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train", overrides=["agent=sb3", "env=MemoryS7", "num_envs=1",
                                          "grid_encoding=onehot"])
    from rlmem.agents.sb3.train import make_envs

    envs = make_envs(cfg, 1, seed=0)
    try:
        model = build_model(resolve(cfg).recorded(), envs)  # a run's config, sizes decided
        extractor = model.policy.features_extractor
        assert isinstance(extractor, MiniGridExtractor)
        assert extractor.image.encoding == "onehot"
    finally:
        envs.close()


def _gate_biases(cell: nn.Module) -> list[tuple[str, torch.Tensor, int]]:
    """(kind, total bias, hidden size) of every torch LSTM/GRU (cell) inside ``cell``."""
    found = []
    for module in cell.modules():
        if isinstance(module, (nn.LSTM, nn.GRU)):
            kind = "lstm" if isinstance(module, nn.LSTM) else "gru"
            bias_ih, bias_hh = module.bias_ih_l0, module.bias_hh_l0
            assert isinstance(bias_ih, torch.Tensor) and isinstance(bias_hh, torch.Tensor)
            found.append((kind, bias_ih + bias_hh, module.hidden_size))
        elif isinstance(module, (nn.LSTMCell, nn.GRUCell)):
            kind = "lstm" if isinstance(module, nn.LSTMCell) else "gru"
            found.append((kind, module.bias_ih + module.bias_hh, module.hidden_size))
    return found


@pytest.mark.parametrize("name", sorted(CELLS))
def test_gate_biases_reach_every_lstm_and_gru_inside_a_cell(name: str) -> None:
    """A cell with an LSTM inside has ``forget_bias`` (default 1), one with a GRU inside has
    ``update_bias``; the value lands on exactly that gate's rows, the others keep torch's init."""
    hparams = hyperparameters(CELLS[name])
    gates = _gate_biases(make_cell(name, input_size=5, hidden_size=6))
    kinds = {kind for kind, _, _ in gates}
    assert ("lstm" in kinds) == ("forget_bias" in hparams), name
    assert ("gru" in kinds) == ("update_bias" in hparams), name
    if "forget_bias" in hparams:
        assert hparams["forget_bias"].default == 1.0
    for key, kind, block in (("forget_bias", "lstm", LSTM_FORGET_GATE),
                             ("update_bias", "gru", GRU_UPDATE_GATE)):
        if key not in hparams:
            continue
        option: dict[str, Any] = {key: 2.5}
        cell = make_cell(name, input_size=5, hidden_size=6, **option)
        for found_kind, bias, hidden in _gate_biases(cell):
            if found_kind != kind:
                continue
            rows = torch.zeros(bias.shape[0], dtype=torch.bool)
            rows[block * hidden:(block + 1) * hidden] = True
            assert torch.all(bias[rows] == 2.5), (name, bias)
            assert bias[~rows].abs().max() < 2 * hidden ** -0.5, (name, bias)



@pytest.mark.parametrize(
    "name", sorted(n for n in CELLS if "forget_bias" in hyperparameters(CELLS[n])))
def test_forget_bias_none_keeps_torchs_random_draw(name: str) -> None:
    """``forget_bias=None`` leaves the forget gate's rows as torch drew them: a sum of two
    ``U(±1/√H)`` draws that differs per unit, not one constant (``forget_bias=0``)."""
    hidden = 32
    for found_kind, bias, _ in _gate_biases(make_cell(name, input_size=5, hidden_size=hidden,
                                                      forget_bias=None)):
        assert found_kind == "lstm"
        forget = bias[LSTM_FORGET_GATE * hidden:(LSTM_FORGET_GATE + 1) * hidden]
        assert forget.abs().max() <= 2 * hidden ** -0.5, (name, forget)
        assert forget.unique().numel() == hidden, (name, forget)


@pytest.mark.parametrize(
    "name", sorted(n for n in CELLS if "chrono_t_max" in hyperparameters(CELLS[n])))
def test_chrono_draws_each_forget_bias_from_log_uniform_and_the_input_bias_opposite(
        name: str) -> None:
    """Tallec & Ollivier's chrono initialisation: ``b_f ~ log U[1, T_max - 1]``, ``b_i = -b_f``,
    on every LSTM inside the cell; asking for it beside a forget_bias, or with T_max < 3, fails
    before anything is built."""
    hidden, t_max = 64, 120
    torch.manual_seed(0)
    gates = _gate_biases(make_cell(name, input_size=5, hidden_size=hidden, forget_bias=None,
                                   chrono_t_max=t_max))
    assert gates
    for kind, bias, _ in gates:
        assert kind == "lstm"
        forget = bias[LSTM_FORGET_GATE * hidden:(LSTM_FORGET_GATE + 1) * hidden]
        assert torch.equal(bias[:hidden], -forget)
        assert forget.min() >= 0.0 and forget.max() <= math.log(t_max - 1)
        # The time scales e^{b_f}, not the biases, are uniform: half lie below T_max / 2.
        assert 0.3 < (forget.exp() < t_max / 2).float().mean() < 0.7
    with pytest.raises(ValueError, match="forget_bias=None"):
        make_cell(name, input_size=5, hidden_size=hidden, chrono_t_max=t_max)
    with pytest.raises(ValueError, match="at least 3"):
        make_cell(name, input_size=5, hidden_size=hidden, forget_bias=None, chrono_t_max=2)

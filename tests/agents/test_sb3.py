"""``rlmem.agents.sb3``: every registered cell inside sb3-contrib's RecurrentPPO.

Parametrised over ``CELLS``, so a newly registered cell is covered by registering it.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
import torch
from gymnasium import spaces
from minigrid.wrappers import ImgObsWrapper
from sb3_contrib import RecurrentPPO
from sb3_contrib.common.recurrent.buffers import RecurrentRolloutBuffer
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from sb3_envs import CartPoleNoVelEnv, CueRecallEnv, ToDictWrapper
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.logger import configure

from rlmem.agents.sb3 import (
    CnnMemoryPolicy,
    MemoryCallback,
    MemoryPolicy,
    MiniGridExtractor,
    MultiInputMemoryPolicy,
    PackedMemory,
    StatePacker,
    attach_loss,
)
from rlmem.cells import CELLS, Stacked, make_cell
from rlmem.cells.sarnn import SARNN
from rlmem.envs import env_spec, make_env

PolicyT = TypeVar("PolicyT", bound=RecurrentActorCriticPolicy)
CELL_NAMES = sorted(CELLS)

_SMALLER = {"memlstm": {"capacity": 8}}
"""Keeps the packed state (and so the test) small; the packing does not depend on it."""


def memory_kwargs(name: str, **extra: Any) -> dict[str, Any]:
    return {"hidden_size": 8, **_SMALLER.get(name, {}), **extra}


def cue_env(n_envs: int = 2, seed: int = 0) -> Any:
    return make_vec_env(CueRecallEnv, n_envs=n_envs, seed=seed)


def random_state(cell: Any, batch: int, seed: int) -> Any:
    """Random bytes in every non-bool field (NaN and subnormal patterns, any integer)."""
    generator = torch.Generator().manual_seed(seed)
    fields = []
    for shape, dtype in cell.state_shapes().values():
        dtype = dtype or torch.float32
        full = (batch, *shape)
        if dtype == torch.bool:
            fields.append(torch.rand(full, generator=generator) < 0.5)
        else:
            count = int(np.prod(full)) * dtype.itemsize
            raw = torch.randint(0, 256, (count,), dtype=torch.uint8, generator=generator)
            fields.append(raw.view(dtype).reshape(full))
    return cell.state_type(*fields)


def assert_bitwise_equal(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    for key, left, right in zip(a._fields, a, b, strict=True):
        assert left.dtype == right.dtype and left.shape == right.shape, key
        assert torch.equal(left.contiguous().view(torch.uint8),
                           right.contiguous().view(torch.uint8)), key


# --- packing -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CELL_NAMES)
def test_packing_round_trips_bit_exactly(name: str) -> None:
    cell = make_cell(name, input_size=3, **memory_kwargs(name))
    packer = StatePacker.for_cell(cell)
    state = random_state(cell, batch=5, seed=1)
    h, c = packer.pack(state)
    assert h.shape == c.shape == (1, 5, packer.hidden_size)
    assert h.dtype == c.dtype == torch.float32
    assert 2 * packer.hidden_size >= packer.words >= cell.state_size()
    assert_bitwise_equal(packer.unpack((h, c)), state)
    # RecurrentPPO starts from zeros: they must mean the initial state, and vice versa.
    zeros = torch.zeros(1, 5, packer.hidden_size)
    assert_bitwise_equal(packer.unpack((zeros, zeros)), cell.initial_state(5))
    assert all(not part.any() for part in packer.pack(cell.initial_state(5)))


@pytest.mark.parametrize("name", CELL_NAMES)
def test_packed_states_survive_the_rollout_buffer(name: str) -> None:
    """Through RecurrentRolloutBuffer's numpy copies, flattening and sequence slicing."""
    cell = make_cell(name, input_size=3, **memory_kwargs(name))
    packer = StatePacker.for_cell(cell)
    n_steps, n_envs = 4, 3
    buffer = RecurrentRolloutBuffer(
        n_steps, spaces.Box(-np.inf, np.inf, (1,)), spaces.Discrete(2),
        (n_steps, 1, n_envs, packer.hidden_size), "cpu", n_envs=n_envs)
    states = {}
    for step in range(n_steps):
        pi, vf = random_state(cell, n_envs, seed=2 * step), random_state(cell, n_envs, 2 * step + 1)
        for env in range(n_envs):
            states[step * n_envs + env] = (pi, vf, env)
        buffer.add(np.arange(n_envs, dtype=np.float32)[:, None] + step * n_envs,
                   np.zeros((n_envs, 1)), np.zeros(n_envs), np.ones(n_envs),  # all starts:
                   torch.zeros(n_envs), torch.zeros(n_envs),  # every step is a sequence
                   lstm_states=RNNStates(packer.pack(pi), packer.pack(vf)))
    buffer.compute_returns_and_advantage(torch.zeros(n_envs), np.zeros(n_envs))
    seen = 0
    for sample in buffer.get(batch_size=5):
        for k, key in enumerate(sample.observations[:, 0].long().tolist()):
            pi, vf, env = states[key]
            for packed, expected in ((sample.lstm_states.pi, pi), (sample.lstm_states.vf, vf)):
                got = packer.unpack((packed[0][:, k:k + 1], packed[1][:, k:k + 1]))
                assert_bitwise_equal(got, type(expected)(*(f[env:env + 1] for f in expected)))
            seen += 1
    assert seen == n_steps * n_envs


def test_unsupported_state_dtype_is_rejected() -> None:
    from typing import NamedTuple

    class Odd(NamedTuple):
        z: torch.Tensor

    with pytest.raises(TypeError, match="complex64"):
        StatePacker(Odd, {"z": ((2,), torch.complex64)})


# --- the memory module: resets go through the cell ---------------------------------------


@pytest.mark.parametrize("name", CELL_NAMES)
def test_episode_starts_reset_through_the_cell(name: str) -> None:
    torch.manual_seed(0)
    memory = PackedMemory(make_cell(name, input_size=3, **memory_kwargs(name)))
    n_seq, steps, k = 2, 7, 4
    x = torch.randn(n_seq, steps, 3)
    with torch.no_grad():  # a mid-episode state that the cell itself reached
        start_state = memory.packer.pack(memory.cell(torch.randn(5, n_seq, 3))[1])
    starts = torch.zeros(n_seq, steps)
    starts[1, k] = 1.0
    with torch.no_grad():
        out, end, _ = memory(x.reshape(-1, 3), start_state, starts.flatten())
        out = out.reshape(n_seq, steps, -1)
        # Sequence 1 from step k must equal a fresh run from the initial state.
        zeros = tuple(torch.zeros(1, 1, memory.hidden_size) for _ in range(2))
        fresh, fresh_end, _ = memory(x[1, k:], zeros, torch.zeros(steps - k))
        # Sequence 0 (no start) must equal running it alone.
        alone, _, _ = memory(x[0], tuple(p[:, :1] for p in start_state),
                                     torch.zeros(steps))
    torch.testing.assert_close(out[1, k:], fresh, rtol=0, atol=1e-6)
    torch.testing.assert_close(out[0], alone, rtol=0, atol=1e-6)
    for got, want in ((end, fresh_end), ):
        state, fresh_state = memory.packer.unpack(got), memory.packer.unpack(want)
        for key, a, b in zip(state._fields, state, fresh_state, strict=True):
            if a.is_floating_point():
                torch.testing.assert_close(a[1:], b, rtol=0, atol=1e-6, msg=key)
            else:
                assert torch.equal(a[1:], b), key


# --- RecurrentPPO with every cell ----------------------------------------------------------


class _CheckReplay(BaseCallback):
    """At the first rollout's end (before any update), recompute the rollout's log-probs and
    values the way RecurrentPPO.train() does: padded minibatch sequences, stored states."""

    def __init__(self, batch_size: int) -> None:
        super().__init__()
        self.batch_size = batch_size
        self.checked = 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.checked:
            return
        assert isinstance(self.model, RecurrentPPO)
        policy = self.model.policy
        assert isinstance(policy, RecurrentActorCriticPolicy)
        buffer = self.model.rollout_buffer
        assert isinstance(buffer, RecurrentRolloutBuffer)
        with torch.no_grad():
            for data in buffer.get(self.batch_size):
                mask = data.mask > 0
                values, log_prob, _ = policy.evaluate_actions(
                    data.observations, data.actions.long().flatten(), data.lstm_states,
                    data.episode_starts)
                torch.testing.assert_close(log_prob[mask], data.old_log_prob[mask],
                                           rtol=0, atol=1e-5)
                torch.testing.assert_close(values.flatten()[mask], data.old_values[mask],
                                           rtol=0, atol=1e-5)
                self.checked += 1


@pytest.mark.parametrize("name", CELL_NAMES)
def test_learns_a_few_hundred_steps_and_replays_rollouts_exactly(name: str) -> None:
    # 3 envs × 16 steps in minibatches of 20: sequences cut across envs and episodes (length
    # 6), so training sees padding, mid-sequence resets and states stored mid-episode.
    model = RecurrentPPO(MemoryPolicy, cue_env(3), n_steps=16, batch_size=20, n_epochs=2,
                         seed=0, policy_kwargs=dict(memory=name,
                                                    memory_kwargs=memory_kwargs(name)))
    assert isinstance(model.policy, MemoryPolicy)
    before = [p.detach().clone() for p in model.policy.lstm_actor.cell.parameters()]
    replay = _CheckReplay(batch_size=20)
    model.learn(240, callback=[replay, MemoryCallback()])
    assert replay.checked >= 3
    after = list(model.policy.lstm_actor.cell.parameters())
    assert all(torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def _rollout(model: RecurrentPPO, seed: int, steps: int = 14) -> list[tuple]:
    env = cue_env(2, seed=seed)
    obs = env.reset()
    state, starts, trace = None, np.ones(2, dtype=bool), []
    for _ in range(steps):
        actions, state = model.predict(obs, state=state, episode_start=starts,
                                       deterministic=True)
        assert state is not None
        trace.append((actions.copy(), state[0].copy(), state[1].copy()))
        obs, _, starts, _ = env.step(actions)
    return trace


@pytest.mark.parametrize("name", CELL_NAMES)
def test_save_load_predict_evaluate(name: str, tmp_path: Path) -> None:
    model = RecurrentPPO(MemoryPolicy, cue_env(), n_steps=16, batch_size=16, n_epochs=1,
                         seed=1, policy_kwargs=dict(memory=name,
                                                    memory_kwargs=memory_kwargs(name)))
    model.learn(32)
    expected = _rollout(model, seed=5)
    model.save(tmp_path / "model.zip")
    loaded = RecurrentPPO.load(tmp_path / "model.zip", device=model.device)
    assert isinstance(loaded.policy, MemoryPolicy)
    assert loaded.policy.memory == name
    for (a1, h1, c1), (a2, h2, c2) in zip(expected, _rollout(loaded, seed=5), strict=True):
        assert np.array_equal(a1, a2)
        assert np.array_equal(h1.view(np.uint32), h2.view(np.uint32))
        assert np.array_equal(c1.view(np.uint32), c2.view(np.uint32))
    mean, _ = evaluate_policy(loaded, cue_env(), n_eval_episodes=4, warn=False)
    assert isinstance(mean, float)
    assert 0.0 <= mean <= 1.0
    # The policy alone round-trips too (policy.save keeps memory and memory_kwargs).
    model.policy.save(str(tmp_path / "policy.pt"))
    alone = MemoryPolicy.load(str(tmp_path / "policy.pt"))
    assert alone.memory == name and alone.memory_kwargs == memory_kwargs(name)


# --- sb3-contrib's own RecurrentPPO test cases, with a cell --------------------------------

VARIANTS = [
    {},
    {"share_features_extractor": False},
    {"shared_lstm": True, "enable_critic_lstm": False},
    {"enable_critic_lstm": False},
    {"enable_critic_lstm": False, "share_features_extractor": False},
]


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: ",".join(v) or "default")
def test_critic_variants_on_cartpole_without_velocities(variant: dict[str, Any]) -> None:
    env = make_vec_env(CartPoleNoVelEnv, n_envs=2, seed=0)
    model = RecurrentPPO(MemoryPolicy, env, n_steps=16, seed=0, n_epochs=2,
                         policy_kwargs=dict(memory="relstm", memory_kwargs=memory_kwargs("relstm"),
                                            **variant))
    policy = model.policy
    assert (policy.lstm_critic is not None) == variant.get("enable_critic_lstm", True)
    assert (policy.critic is not None) == (not variant.get("enable_critic_lstm", True)
                                           and not variant.get("shared_lstm", False))
    model.learn(64, callback=MemoryCallback())


@pytest.mark.parametrize("variant", [{}, {"shared_lstm": True, "enable_critic_lstm": False}],
                         ids=["default", "shared"])
def test_dict_observations(variant: dict[str, Any]) -> None:
    env = make_vec_env(CueRecallEnv, n_envs=2, wrapper_class=ToDictWrapper)
    model = RecurrentPPO(MultiInputMemoryPolicy, env, n_steps=16, n_epochs=2, seed=0,
                         policy_kwargs=dict(memory="gru", memory_kwargs=memory_kwargs("gru"),
                                            **variant))
    model.learn(32)
    evaluate_policy(model, env, n_eval_episodes=2, warn=False)


def test_images() -> None:
    env = FakeImageEnv(screen_height=40, screen_width=40, n_channels=3)
    model = RecurrentPPO(CnnMemoryPolicy, env, n_steps=16, n_epochs=1, seed=0,
                         policy_kwargs=dict(memory="lstm", memory_kwargs=memory_kwargs("lstm"),
                                            features_extractor_kwargs=dict(features_dim=16)))
    model.learn(32)


def test_continuous_actions_with_sde() -> None:
    model = RecurrentPPO(MemoryPolicy, "Pendulum-v1", n_steps=16, n_epochs=1, seed=0,
                         use_sde=True, sde_sample_freq=4, clip_range_vf=0.1,
                         policy_kwargs=dict(memory="tarnn", memory_kwargs=memory_kwargs("tarnn")))
    model.learn(32)


def test_bad_configurations_fail_before_training() -> None:
    def build(**kwargs: Any) -> RecurrentPPO:
        return RecurrentPPO(MemoryPolicy, "CartPole-v1", n_steps=16, policy_kwargs=kwargs)

    with pytest.raises(ValueError, match="shared_lstm"):
        build(shared_lstm=True, enable_critic_lstm=True)
    with pytest.raises(ValueError, match="share_features_extractor"):
        build(shared_lstm=True, enable_critic_lstm=False, share_features_extractor=False)
    with pytest.raises(KeyError, match="valid cells"):
        build(memory="lstmm")
    with pytest.raises(TypeError, match="unknown hyperparameter"):
        build(memory="relstm", memory_kwargs={"short_trm": 3})
    with pytest.raises(ValueError, match="input_size"):
        build(memory="gru", memory_kwargs={"input_size": 3})


# --- sb3-contrib's LSTM arguments ----------------------------------------------------------


def _policies(policy_class: type[PolicyT], **kwargs: Any) -> PolicyT:
    env = cue_env(1)
    return policy_class(env.observation_space, env.action_space, lambda _: 3e-4, **kwargs)


def test_a_plain_swap_keeps_sb3_contribs_memory_size() -> None:
    ours, theirs = _policies(MemoryPolicy), _policies(RecurrentActorCriticPolicy)
    assert ours.memory == "lstm" and type(ours.lstm_actor.cell).__name__ == "LSTM"
    assert ours.lstm_actor.cell.hidden_size == theirs.lstm_actor.hidden_size == 256
    assert ours.lstm_output_dim == theirs.lstm_output_dim
    assert ours.memory_kwargs == {"hidden_size": 256}


@pytest.mark.parametrize("enable_critic_lstm", [True, False])
def test_lstm_arguments_keep_their_sb3_contrib_meaning(enable_critic_lstm: bool) -> None:
    kwargs = dict(lstm_hidden_size=4, n_lstm_layers=2, lstm_kwargs=dict(dropout=0.5),
                  enable_critic_lstm=enable_critic_lstm)
    ours = _policies(MemoryPolicy, memory="relstm", **kwargs)
    theirs = _policies(RecurrentActorCriticPolicy, **kwargs)
    assert ours.memory_kwargs == {"hidden_size": 4, "num_layers": 2, "dropout": 0.5}
    cells = [ours.lstm_actor.cell]
    if enable_critic_lstm:
        assert ours.lstm_critic is not None
        cells.append(ours.lstm_critic.cell)
    for cell in cells:
        assert isinstance(cell, Stacked) and cell.num_layers == theirs.lstm_actor.num_layers
        assert cell.dropout == theirs.lstm_actor.dropout
        assert all(layer.name == "relstm" and layer.hidden_size == 4 for layer in cell.layers)
    assert ours.lstm_output_dim == theirs.lstm_output_dim == 4
    if not enable_critic_lstm:
        assert ours.critic is not None and theirs.critic is not None
        assert ours.critic.out_features == theirs.critic.out_features == 4


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(lstm_hidden_size=4, memory_kwargs=dict(hidden_size=4)),
     r"lstm_hidden_size=4 and memory_kwargs\['hidden_size'\]=4 both set"),
    (dict(n_lstm_layers=2, memory_kwargs=dict(num_layers=3)),
     r"n_lstm_layers=2 and memory_kwargs\['num_layers'\]=3 both set"),
    (dict(lstm_kwargs=dict(dropout=0.1), memory_kwargs=dict(num_layers=2, dropout=0.2)),
     r"lstm_kwargs\['dropout'\]=0.1 and memory_kwargs\['dropout'\]=0.2 both set"),
    (dict(lstm_kwargs=dict(bias=False)), r"lstm_kwargs\['bias'\].*forget_bias"),
    (dict(lstm_kwargs=dict(proj_size=2)), r"lstm_kwargs\['proj_size'\].*hidden_size"),
    (dict(lstm_kwargs=dict(bidirectional=True)), "causal"),
    (dict(lstm_kwargs=dict(num_layers=2)), "n_lstm_layers"),
    (dict(lstm_kwargs=dict(device="cpu")), r"RecurrentPPO\(\.\.\., device=\.\.\.\)"),
    (dict(n_lstm_layers=0), "num_layers must be an int >= 1"),
    (dict(n_lstm_layers=2, lstm_kwargs=dict(dropout=1.0)), r"dropout must be a float in \[0, 1\)"),
])
def test_lstm_arguments_that_conflict_or_do_not_apply_say_what_to_use(
        kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _policies(MemoryPolicy, **kwargs)


def test_an_unknown_lstm_kwarg_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"lstm_kwargs\['dropuot'\].*takes 'dropout'"):
        _policies(MemoryPolicy, lstm_kwargs=dict(dropuot=0.1))


def test_stacked_cells_train_replay_save_and_load(tmp_path: Path) -> None:
    """A two-layer stack with dropout: its flat state packs like any other, and the dropout is
    off outside of training (the rollouts replay exactly, a loaded model predicts the same)."""
    policy_kwargs = dict(memory="relstm", lstm_hidden_size=8, n_lstm_layers=2,
                         lstm_kwargs=dict(dropout=0.3))
    model = RecurrentPPO(MemoryPolicy, cue_env(3), n_steps=16, batch_size=20, n_epochs=2,
                         seed=0, policy_kwargs=policy_kwargs)
    replay = _CheckReplay(batch_size=20)
    model.learn(96, callback=[replay, MemoryCallback()])
    assert replay.checked >= 3
    expected = _rollout(model, seed=5)
    model.save(tmp_path / "model.zip")
    loaded = RecurrentPPO.load(tmp_path / "model.zip", device=model.device)
    assert loaded.policy.memory_kwargs == {"hidden_size": 8, "num_layers": 2, "dropout": 0.3}
    for (a1, h1, c1), (a2, h2, c2) in zip(expected, _rollout(loaded, seed=5), strict=True):
        assert np.array_equal(a1, a2)
        assert np.array_equal(h1.view(np.uint32), h2.view(np.uint32))
        assert np.array_equal(c1.view(np.uint32), c2.view(np.uint32))
    model.policy.save(str(tmp_path / "policy.pt"))
    assert isinstance(MemoryPolicy.load(str(tmp_path / "policy.pt")).lstm_actor.cell, Stacked)


# --- aux losses and diagnostics -------------------------------------------------------------


def test_attach_loss_adds_the_gradient_of_the_loss() -> None:
    torch.manual_seed(0)
    x = torch.randn(5, requires_grad=True)
    w = torch.randn(3, requires_grad=True)
    aux = (w ** 2).sum() * 0.3
    carried = attach_loss(x * 2.0, aux)
    torch.testing.assert_close(carried, x * 2.0)
    (carried ** 2).sum().backward()
    assert x.grad is not None and w.grad is not None
    grad_x, grad_w = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    ((x * 2.0) ** 2).sum().add((w ** 2).sum() * 0.3).backward()
    torch.testing.assert_close(grad_x, x.grad)
    torch.testing.assert_close(grad_w, w.grad)


@pytest.mark.parametrize(("name", "hparams"), [("sarnn", {"lam": 0.1}),
                                               ("tarnn", {"gamma1": 0.1, "gamma2": 0.1})])
def test_aux_losses_reach_the_ppo_gradient(name: str, hparams: dict[str, float]) -> None:
    model = RecurrentPPO(MemoryPolicy, cue_env(2), n_steps=8, seed=0, device="cpu",
                         policy_kwargs=dict(memory=name,
                                            memory_kwargs=memory_kwargs(name, **hparams)))
    policy = model.policy
    assert isinstance(policy, MemoryPolicy)
    obs = torch.randn(12, 2)
    starts = torch.zeros(12)
    starts[[0, 7]] = 1.0
    zeros = tuple(torch.zeros(1, 2, policy.lstm_actor.hidden_size) for _ in range(2))
    states = RNNStates(zeros, zeros)
    values, _, _ = policy.evaluate_actions(obs, torch.zeros(12), states, starts)
    # The values carry no aux *value*, but a backward through them carries its gradient.
    policy.zero_grad()
    (values * 0.0).sum().backward()
    carried = [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
               for p in policy.parameters()]
    policy.zero_grad()
    features = policy.extract_features(obs)
    critic = policy.lstm_critic
    assert critic is not None
    direct = sum(memory(features, zeros, starts)[2].total_loss()
                 for memory in (policy.lstm_actor, critic))
    assert isinstance(direct, torch.Tensor)
    assert float(direct.detach()) > 0
    direct.backward()
    for got, param in zip(carried, policy.parameters(), strict=True):
        want = param.grad if param.grad is not None else torch.zeros_like(param)
        torch.testing.assert_close(got, want)
    assert any(g.abs().sum() > 0 for g in carried)


def test_callback_anneals_and_logs_diagnostics(tmp_path: Path) -> None:
    model = RecurrentPPO(MemoryPolicy, cue_env(2), n_steps=16, batch_size=16, n_epochs=1,
                         seed=0, policy_kwargs=dict(memory="sarnn",
                                                    memory_kwargs=memory_kwargs("sarnn",
                                                                                lam=0.01)))
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(96, callback=MemoryCallback())
    # The last anneal saw progress 1: the slope is at the end of its schedule.
    assert isinstance(model.policy, MemoryPolicy)
    cell = model.policy.lstm_actor.cell
    assert isinstance(cell, SARNN)
    assert float(cell.slope) == pytest.approx(min(cell.slope_max,
                                                  1 + cell.slope_rate * cell.anneal_epochs))
    with (tmp_path / "progress.csv").open() as file:
        rows = list(csv.DictReader(file))
    logged = [row for row in rows if row.get("memory/skip_percent")]
    assert logged, rows[0].keys()
    assert 0.0 <= float(logged[-1]["memory/skip_percent"]) <= 100.0
    assert float(logged[-1]["memory/critic/loss_budget"]) > 0.0


def test_callback_rejects_other_policies() -> None:
    model = RecurrentPPO("MlpLstmPolicy", "CartPole-v1", n_steps=16)
    with pytest.raises(TypeError, match="MemoryPolicy"):
        model.learn(16, callback=MemoryCallback())


@pytest.mark.parametrize("env_name", ["DoorKey-5x5", "GoToObject-6x6-N2"])
def test_minigrid_extractor_with_and_without_mission(env_name: str) -> None:
    env = make_vec_env(lambda: make_env(env_name), n_envs=2, seed=0)
    model = RecurrentPPO(MultiInputMemoryPolicy, env, n_steps=16, n_epochs=1, seed=0,
                         policy_kwargs=dict(memory="relstm", memory_kwargs=memory_kwargs("relstm"),
                                            features_extractor_class=MiniGridExtractor,
                                            normalize_images=False))
    extractor = model.policy.features_extractor
    assert isinstance(env.observation_space, spaces.Dict)
    assert (extractor.mission is not None) == ("mission" in env.observation_space.spaces)
    model.learn(32)


def test_minigrid_extractor_on_the_image_alone() -> None:
    env = make_vec_env(env_spec("DoorKey-5x5").id, n_envs=2, seed=0, wrapper_class=ImgObsWrapper)
    model = RecurrentPPO(CnnMemoryPolicy, env, n_steps=16, n_epochs=1, seed=0,
                         policy_kwargs=dict(memory="gru", memory_kwargs=memory_kwargs("gru"),
                                            features_extractor_class=MiniGridExtractor,
                                            normalize_images=False))
    assert model.policy.features_extractor.channels_first  # SB3 transposed the image
    model.learn(32)

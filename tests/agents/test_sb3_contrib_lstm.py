"""sb3-contrib's RecurrentPPO tests (its ``tests/test_lstm.py``), run with every rlmem cell.

The cases are sb3-contrib's, with its own ``policy_kwargs`` (``lstm_hidden_size``,
``n_lstm_layers``, ``lstm_kwargs``, the critic options) left as they are. Only two things change:
the policy, ``MlpLstmPolicy`` / ``CnnLstmPolicy`` / ``MultiInputLstmPolicy`` becoming
:class:`MemoryPolicy` / :class:`CnnMemoryPolicy` / :class:`MultiInputMemoryPolicy`, and a
``memory=<cell>`` entry added to ``policy_kwargs`` (for ``lstm`` that is the default, so those
cases are exactly a class swap). Every functional case runs for every registered cell. The
environments are sb3-contrib's, from ``tests/sb3_envs.py``, whose Dict wrapper adds a constant
``flag`` key next to ``obs``.

An invalid critic combination raises :class:`~rlmem.agents.sb3.PolicyArgumentError`, both the
``AssertionError`` sb3-contrib raises (so its own :func:`test_check` passes unchanged) and a
``ValueError`` with a message saying what to choose (which, unlike an ``assert``, ``python -O``
keeps); :func:`test_invalid_critic_combinations_are_rejected` checks the message.

The learning test on CartPole without velocities is marked ``slow`` (run with ``-m slow``); it
covers lstm, gru and relstm (relstm with twice the steps), and runs sb3-contrib's own
``MlpLstmPolicy`` beside them as the reference.
``python tests/agents/test_sb3_contrib_lstm.py <cell> <seed> [steps]`` runs it for another seed
(``sb3-contrib`` as the cell: the reference).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest
import torch
from gymnasium import Env
from gymnasium.wrappers import TimeLimit
from sb3_contrib import RecurrentPPO
from sb3_envs import CartPoleNoVelEnv, ToDictWrapper
from stable_baselines3.common.callbacks import EvalCallback
from stable_baselines3.common.env_checker import check_env
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import FakeImageEnv
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from rlmem.agents.sb3 import (
    CnnMemoryPolicy,
    MemoryPolicy,
    MultiInputMemoryPolicy,
    PolicyArgumentError,
)
from rlmem.cells import CELLS, get_cell_class, hyperparameters
from rlmem.cells.lstm import LSTM

CELL_NAMES = sorted(CELLS)

POLICIES: dict[str, type[MemoryPolicy]] = {
    "MlpLstmPolicy": MemoryPolicy, "CnnLstmPolicy": CnnMemoryPolicy,
    "MultiInputLstmPolicy": MultiInputMemoryPolicy}
"""sb3-contrib's policy names and the rlmem policy that takes each one's place."""

_SMALL_STACK = dict(lstm_hidden_size=4, lstm_kwargs=dict(dropout=0.5), n_lstm_layers=2)

POLICY_KWARGS: list[dict[str, Any]] = [
    {},
    dict(shared_lstm=True, enable_critic_lstm=False),
    dict(enable_critic_lstm=True, **_SMALL_STACK),
    dict(enable_critic_lstm=False, **_SMALL_STACK),
]
"""sb3-contrib's ``policy_kwargs`` cases for the MLP and Dict-observation policies."""

CNN_POLICY_KWARGS: list[dict[str, Any]] = [
    {},
    {"share_features_extractor": False},
    *POLICY_KWARGS[1:],
    dict(enable_critic_lstm=False, lstm_hidden_size=4, share_features_extractor=False),
]
"""sb3-contrib's ``policy_kwargs`` cases for the image policy."""


def kwargs_id(kwargs: dict[str, Any]) -> str:
    return ",".join(f"{key}={value}" for key, value in kwargs.items()) or "default"


EVERY_CASE_BY_DEFAULT = ("lstm", "relstm")
"""Cells that run every ``policy_kwargs`` case in the default suite."""


def cell_cases(cases: list[dict[str, Any]]) -> list[Any]:
    """Every cell with every case of ``cases``: by default, each cell with the default case and
    the small stack (hidden size 4, two layers, dropout: the case a cell's own shapes can trip
    on), and :data:`EVERY_CASE_BY_DEFAULT` with all; the rest (the critic and sharing options,
    which the policy handles alike for every cell) with ``-m slow``."""
    return [pytest.param(cell, kwargs, id=f"{cell}-{kwargs_id(kwargs)}",
                         marks=() if cell in EVERY_CASE_BY_DEFAULT or not kwargs
                         or kwargs == POLICY_KWARGS[2] else pytest.mark.slow)
            for cell in CELL_NAMES for kwargs in cases]


def recurrent_ppo(policy: str, env: Env | VecEnv | str, cell: str,
                  policy_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> RecurrentPPO:
    """``RecurrentPPO(policy, env, policy_kwargs=policy_kwargs, **kwargs)`` as sb3-contrib's
    test writes it, with rlmem's policy in place of ``policy`` and ``cell`` as its memory."""
    return RecurrentPPO(POLICIES[policy], env, policy_kwargs={**(policy_kwargs or {}),
                                                              "memory": cell}, **kwargs)


def test_env() -> None:
    check_env(CartPoleNoVelEnv())


@pytest.mark.parametrize(("cell", "policy_kwargs"), cell_cases(CNN_POLICY_KWARGS))
def test_cnn(cell: str, policy_kwargs: dict[str, Any]) -> None:
    model = recurrent_ppo(
        "CnnLstmPolicy", FakeImageEnv(screen_height=40, screen_width=40, n_channels=3), cell,
        dict(**policy_kwargs, features_extractor_kwargs=dict(features_dim=32)),
        n_steps=16, seed=0, n_epochs=2)
    model.learn(total_timesteps=32)


@pytest.mark.parametrize(("cell", "policy_kwargs"), cell_cases(POLICY_KWARGS))
def test_policy_kwargs(cell: str, policy_kwargs: dict[str, Any]) -> None:
    model = recurrent_ppo("MlpLstmPolicy", "CartPole-v1", cell, policy_kwargs, n_steps=16, seed=0)
    model.learn(total_timesteps=32)


def test_check() -> None:
    # sb3-contrib's test_check, unchanged but for the policy: it expects an AssertionError.
    policy_kwargs: dict[str, Any] = dict(shared_lstm=True, enable_critic_lstm=True)
    with pytest.raises(AssertionError):
        recurrent_ppo("MlpLstmPolicy", "CartPole-v1", "lstm", policy_kwargs, n_steps=16,
                      seed=0)

    policy_kwargs = dict(shared_lstm=True, enable_critic_lstm=False,
                         share_features_extractor=False)
    with pytest.raises(AssertionError):
        recurrent_ppo("MlpLstmPolicy", "CartPole-v1", "lstm", policy_kwargs, n_steps=16,
                      seed=0)


@pytest.mark.parametrize("cell", CELL_NAMES)
def test_invalid_critic_combinations_are_rejected(cell: str) -> None:
    # sb3-contrib asserts (AssertionError); rlmem's error is also a ValueError, which
    # `python -O` keeps, and says what to choose.
    for policy_kwargs in (dict(shared_lstm=True, enable_critic_lstm=True),
                          dict(shared_lstm=True, enable_critic_lstm=False,
                               share_features_extractor=False)):
        with pytest.raises(PolicyArgumentError, match="shared_lstm") as raised:
            recurrent_ppo("MlpLstmPolicy", "CartPole-v1", cell, policy_kwargs, n_steps=16,
                          seed=0)
        assert isinstance(raised.value, ValueError) and isinstance(raised.value, AssertionError)


def _forget_biases(model: RecurrentPPO) -> set[float]:
    """The ``forget_bias`` every LSTM inside the policy's cells was started with."""
    policy = model.policy
    assert isinstance(policy, MemoryPolicy) and policy.lstm_critic is not None
    cells = [policy.lstm_actor.cell, policy.lstm_critic.cell]
    biases = (getattr(module, "forget_bias", None) for cell in cells for module in cell.modules())
    return {bias for bias in biases if bias is not None}


@pytest.mark.parametrize("cell", CELL_NAMES)
def test_a_plain_swap_starts_the_cells_as_sb3_contrib_starts_its_lstm(cell: str) -> None:
    # sb3-contrib's nn.LSTM keeps torch's init (forget-gate bias 0), rlmem's cells default to 1.
    swapped = recurrent_ppo("MlpLstmPolicy", "CartPole-v1", cell, n_steps=16, seed=0)
    has_forget_gate = "forget_bias" in hyperparameters(get_cell_class(cell))
    assert _forget_biases(swapped) == ({0.0} if has_forget_gate else set())
    if has_forget_gate:  # rlmem's own initialisation, asked for
        rlmem_init = recurrent_ppo("MlpLstmPolicy", "CartPole-v1", cell,
                                   dict(memory_kwargs=dict(forget_bias=1.0)), n_steps=16, seed=0)
        assert _forget_biases(rlmem_init) == {1.0}
    if cell == "lstm":  # the gate's bias itself, b_if + b_hf
        assert isinstance(swapped.policy, MemoryPolicy)
        cell_module = swapped.policy.lstm_actor.cell
        assert isinstance(cell_module, LSTM)
        lstm = cell_module.rnn
        hidden = lstm.hidden_size
        forget = slice(hidden, 2 * hidden)
        bias_ih, bias_hh = lstm.bias_ih_l0, lstm.bias_hh_l0
        assert isinstance(bias_ih, torch.Tensor) and isinstance(bias_hh, torch.Tensor)
        assert not (bias_ih[forget] + bias_hh[forget]).any()


@pytest.mark.parametrize("env", ["Pendulum-v1", "CartPole-v1"])
@pytest.mark.parametrize("cell", CELL_NAMES)
def test_run(cell: str, env: str) -> None:
    model = recurrent_ppo("MlpLstmPolicy", env, cell, n_steps=16, seed=0)
    model.learn(total_timesteps=32)


# sb3-contrib's test_run_sde takes 4-7 s per cell: lstm and relstm by default, every cell with
# -m slow.
@pytest.mark.parametrize("cell", [cell if cell in ("lstm", "relstm")
                                  else pytest.param(cell, marks=pytest.mark.slow)
                                  for cell in CELL_NAMES])
def test_run_sde(cell: str) -> None:
    model = recurrent_ppo("MlpLstmPolicy", "Pendulum-v1", cell, n_steps=16, seed=0,
                          sde_sample_freq=4, use_sde=True, clip_range_vf=0.1)
    model.learn(total_timesteps=200)


@pytest.mark.parametrize(("cell", "policy_kwargs"), cell_cases(POLICY_KWARGS))
def test_dict_obs(cell: str, policy_kwargs: dict[str, Any]) -> None:
    env = make_vec_env("CartPole-v1", n_envs=1, wrapper_class=ToDictWrapper)
    model = recurrent_ppo("MultiInputLstmPolicy", env, cell, policy_kwargs, n_steps=32)
    model.learn(64)
    evaluate_policy(model, env, warn=False)


def _cartpole_without_velocities() -> Env:
    return TimeLimit(CartPoleNoVelEnv(), max_episode_steps=500)


REFERENCE = "sb3-contrib"
"""The slow test's case that runs sb3-contrib's own ``MlpLstmPolicy``: the reference."""

STEPS = 50_000
"""sb3-contrib's budget for the slow run."""

LONGER: dict[str, int] = {"relstm": 100_000}
"""Cells that learn the task more slowly than an LSTM, with the budget they are given instead
of :data:`STEPS` (measured, see :func:`test_ppo_lstm_performance`); the criterion is
unchanged."""


class _RecordingEvalCallback(EvalCallback):
    """``EvalCallback`` keeping every evaluation's mean return."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.means: list[float] = []

    def _on_step(self) -> bool:
        result = super()._on_step()
        if self.n_calls % self.eval_freq == 0:
            self.means.append(float(self.last_mean_reward))
        return result


class CartPoleRun(NamedTuple):
    """What sb3-contrib's CartPole-without-velocities run measures (returns; 500 at most)."""

    final: float
    """Mean of 10 deterministic episodes on the training env after the last update: what
    sb3-contrib's test asserts above 450."""
    evaluations: list[float]
    """``EvalCallback``'s 20-episode means, every 5000 steps."""


def run_cartpole_without_velocities(cell: str, seed: int = 1, verbose: int = 0,
                                    steps: int = STEPS) -> CartPoleRun:
    """sb3-contrib's slow learning run, its settings unchanged: ``cell`` in :class:`MemoryPolicy`,
    or :data:`REFERENCE`, sb3-contrib's own ``MlpLstmPolicy``; ``steps`` env steps."""
    env = VecNormalize(make_vec_env(_cartpole_without_velocities, n_envs=8))
    eval_callback = _RecordingEvalCallback(
        VecNormalize(make_vec_env(_cartpole_without_velocities, n_envs=4), training=False,
                     norm_reward=False),
        n_eval_episodes=20, eval_freq=5000 // env.num_envs)
    policy_kwargs = dict(net_arch=dict(vf=[64], pi=[]), lstm_hidden_size=64, ortho_init=False,
                         enable_critic_lstm=True)
    settings: dict[str, Any] = dict(n_steps=128, learning_rate=0.0007, verbose=verbose,
                                    batch_size=256, seed=seed, n_epochs=10, max_grad_norm=1,
                                    gae_lambda=0.98)
    if cell == REFERENCE:
        model = RecurrentPPO("MlpLstmPolicy", env, policy_kwargs=policy_kwargs, **settings)
    else:
        model = recurrent_ppo("MlpLstmPolicy", env, cell, policy_kwargs, **settings)
    model.learn(total_timesteps=steps, callback=eval_callback)
    final, _ = evaluate_policy(model, env)
    assert isinstance(final, float)
    return CartPoleRun(float(final), eval_callback.means)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # 100k steps of relstm: 6-7 minutes on a busy 2-core machine
@pytest.mark.parametrize("cell", [REFERENCE, "gru", "lstm", "relstm"])
def test_ppo_lstm_performance(cell: str) -> None:
    """Solving CartPole from positions alone needs memory: a feed-forward policy stays near
    50, the maximum return is 500. sb3-contrib's run (seed 1, 50k steps, its hyperparameters
    and ``policy_kwargs``), its criterion: the final mean return above 450. relstm gets 100k
    steps (:data:`LONGER`).

    Measured with ``python tests/agents/test_sb3_contrib_lstm.py <cell> <seed> [steps]``: per seed,
    the final return (the criterion), and the number of the evaluations of the last 10k steps
    (20 episodes each, at 40k, 45k and 50k, or 90k, 95k and 100k) that were above 450; every
    cell's best evaluation was above 450 in every seed except relstm with rlmem's forget-gate
    bias of 1.

    ======================  ==============================================  ===========
    cell (seeds), steps     final return                                    evaluations
    ======================  ==============================================  ===========
    sb3-contrib's (1-8)     500 500 500 500 500 500 500 494                 18 of 24
    lstm (1-8)              500 500 500 500 431 202 500 472                 21 of 24
    gru (1-6)               500 500 164 500 500 500                         17 of 18
    relstm (1-10), 50k      343 500 411 453 296 385 500 377 370 462         12 of 30
    relstm (1-3), 100k      500 498 500                                      7 of 9
    lstm, bias 1 (1-5)      211 461 500 421 463                              7 of 15
    relstm, bias 1 (1-5)    231 301 500 257 215                              1 of 15
    ======================  ==============================================  ===========

    So rlmem's lstm in sb3-contrib's place is sb3-contrib's model, within its spread: the
    evaluations are as often above 450 (PPO's last updates are not monotone for either:
    sb3-contrib's seed 2 evaluated 156 at 45k), the final criterion fails in 2 of 8 seeds
    against 0 of 8 (too few seeds to tell apart). Started with rlmem's forget-gate bias of 1,
    lstm learns the task more slowly, which is why :class:`MemoryPolicy` starts its cells as
    sb3-contrib does (``SB3_CONTRIB_INIT``). gru passes in 5 of 6 seeds. relstm learns the task
    (best evaluation 465-500 in all 10 seeds at 50k) but more slowly than lstm: at 50k steps
    PPO's last update leaves it above 450 in 4 of 10 seeds, at 100k in 3 of 3. Plausibly its
    attention, reading a mix of the last and the first states of the episode where this task
    needs only the last two positions (a finite difference), takes longer to tune.
    """
    run = run_cartpole_without_velocities(cell, verbose=1, steps=LONGER.get(cell, STEPS))
    print(f"{cell}: final mean return {run.final:.1f}, evaluations {run.evaluations}")
    assert run.final > 450, run


if __name__ == "__main__":
    import sys

    cell_name, seed_text, *steps_text = sys.argv[1:]
    print(run_cartpole_without_velocities(cell_name, int(seed_text),
                                          steps=int(steps_text[0]) if steps_text else STEPS))

"""Slow: ``MemoryPolicy`` learns a memory task at least as well as sb3-contrib's own LSTM policy.

Same task, PPO settings, hidden size, heads, budget and seeds; only the recurrent core differs
(rlmem's ``lstm`` cell through :class:`~rlmem.agents.sb3.MemoryPolicy`, or ``MlpLstmPolicy``'s
``nn.LSTM``). ``CueRecallEnv`` pays 1 for recalling a cue seen ``delay`` steps earlier; without
memory the success rate is 1/2.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from sb3_contrib import RecurrentPPO
from sb3_envs import CueRecallEnv
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from rlmem.agents.sb3 import MemoryCallback, MemoryPolicy

SEEDS = (0, 1, 2)
BUDGET = 10_000
HIDDEN = 32
DELAY = 4
PPO: dict[str, Any] = dict(n_steps=32, batch_size=64, n_epochs=4, learning_rate=1e-3,
                           ent_coef=0.01)


def success_rate(policy: str, seed: int) -> float:
    torch.manual_seed(seed)
    env = make_vec_env(CueRecallEnv, n_envs=8, seed=seed, env_kwargs=dict(delay=DELAY))
    callbacks: list[BaseCallback] = []
    if policy == "MemoryPolicy":
        model = RecurrentPPO(MemoryPolicy, env, seed=seed, **PPO, policy_kwargs=dict(
            memory="lstm", memory_kwargs=dict(hidden_size=HIDDEN), net_arch=[HIDDEN]))
        callbacks.append(MemoryCallback())
    else:
        model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, **PPO, policy_kwargs=dict(
            lstm_hidden_size=HIDDEN, net_arch=[HIDDEN]))
    model.learn(BUDGET, callback=callbacks)
    evaluation = make_vec_env(CueRecallEnv, n_envs=8, seed=1000 + seed,
                              env_kwargs=dict(delay=DELAY))
    mean, _ = evaluate_policy(model, evaluation, n_eval_episodes=200, deterministic=True)
    assert isinstance(mean, float)
    return float(mean)


@pytest.mark.slow
def test_memory_policy_learns_at_least_as_well_as_mlp_lstm_policy() -> None:
    ours = [success_rate("MemoryPolicy", seed) for seed in SEEDS]
    theirs = [success_rate("MlpLstmPolicy", seed) for seed in SEEDS]
    print(f"success over seeds {SEEDS}: MemoryPolicy(lstm) {ours}, MlpLstmPolicy {theirs}")
    assert np.mean(ours) >= 0.9, ours  # far above the memoryless 0.5
    # "At least as well", up to the evaluation's noise (200 episodes: ±0.035 at p=0.5).
    assert np.mean(ours) >= np.mean(theirs) - 0.05, (ours, theirs)

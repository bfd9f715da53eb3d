"""What an env returns is checked before an agent learns from it or acts on it (issue 28,
"Messages"): a NaN observation is not "the policy diverged", an infinite reward is not "PPO loss
is nan", an observation of the wrong shape is not numpy's error. Each names the env and the
step, in training (our PPO, through the CLI; RecurrentPPO's callback) and in evaluation."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from cli_runner import TINY_PPO, run_cli
from faulty_envs import FAULT_STEP, INFINITE_REWARD, NAN_OBSERVATION, WRONG_SHAPE
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from locations import TESTS

from rlmem.agents.env_output import EnvOutputError
from rlmem.agents.policy_evaluation import evaluate_policy

NUM_ENVS = 2  # TINY_PPO's


# A training run each (~15 s): one in the default run, the other two with -m slow; the check
# they share is the same code, and the evaluation test below covers all three by default.
@pytest.mark.parametrize("env, message", [
    (NAN_OBSERVATION, "returned an observation holding nan (element [2])"),
    pytest.param(INFINITE_REWARD, "returned a reward of inf", marks=pytest.mark.slow),
    pytest.param(WRONG_SHAPE, "returned an observation that does not fit its observation space "
                 "(float32 Box of shape [4]) at frame 6: env 0 of 2 returned an observation of "
                 "shape [3] where its space has shape [4]", marks=pytest.mark.slow),
], ids=["nan observation", "infinite reward", "wrong shape"])
def test_training_names_the_env_and_the_frame(env: str, message: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
    run_dir = tmp_path / "run"
    result = run_cli("rlmem.train", f"env=faulty_envs:{env}", *TINY_PPO, "memory.hidden_size=8",
                     f"run_dir={run_dir}", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert f"rlmem.train: error: env faulty_envs:{env} {message}" in result.stderr
    assert f"at frame {FAULT_STEP * NUM_ENVS}" in result.stderr
    assert "Training stopped at 0 frames. No checkpoint was written yet" in result.stderr
    for blamed in ("diverged", "PPO loss", "is nan;", "Output array is the wrong shape"):
        assert blamed not in result.stderr, blamed


class RandomActor:
    """Acts at random: evaluation must stop at the env's fault whatever the actor does."""

    def initial_state(self, num_envs: int) -> None:
        return None

    def act(self, observation: object, state: None, resets: np.ndarray,
            greedy: bool) -> tuple[np.ndarray, None]:
        return np.zeros(len(resets), dtype=np.int64), None


@pytest.mark.parametrize("env, message", [
    (NAN_OBSERVATION, "an observation holding nan"),
    (INFINITE_REWARD, "a reward of inf"),
    (WRONG_SHAPE, "an observation of shape [3] where its space has shape [4]"),
], ids=["nan observation", "infinite reward", "wrong shape"])
def test_evaluation_names_the_env_and_the_step(env: str, message: str) -> None:
    envs = SyncVectorEnv([lambda: gym.make(env)] * NUM_ENVS,
                         autoreset_mode=AutoresetMode.SAME_STEP)
    with pytest.raises(EnvOutputError) as caught:
        evaluate_policy(RandomActor(), envs, 4, greedy=True, seed=0)
    assert f"env {env} returned" in str(caught.value) and message in str(caught.value)
    assert f"step {FAULT_STEP} of the evaluation" in str(caught.value)
    assert "Nothing was evaluated or written." in str(caught.value)


@pytest.mark.parametrize("env, message", [
    (NAN_OBSERVATION, "an observation holding nan"),
    (INFINITE_REWARD, "a reward of inf"),
], ids=["nan observation", "infinite reward"])
def test_recurrent_ppo_names_the_env_and_the_frame(env: str, message: str) -> None:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rlmem.agents.sb3.env_output import EnvOutputCallback

    model = RecurrentPPO("MlpLstmPolicy", DummyVecEnv([lambda: gym.make(env)] * NUM_ENVS),
                         n_steps=8, batch_size=16, n_epochs=1, device="cpu",
                         policy_kwargs={"lstm_hidden_size": 8})
    with pytest.raises(EnvOutputError) as caught:
        model.learn(32, callback=EnvOutputCallback(env))
    assert message in str(caught.value)
    assert f"at frame {FAULT_STEP * NUM_ENVS}" in str(caught.value)

"""Our PPO: GAE by hand, and the isolation of every env's memory through rollout, update and
evaluation (the authors' public fork wiped the memory of all envs at every step)."""

from __future__ import annotations

import functools

import gymnasium as gym
import pytest
import torch
from omegaconf import OmegaConf

from rlmem.agents.policy_evaluation import episode_quotas, evaluate_policy
from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.actor import PPOActor
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.gae import compute_gae
from rlmem.agents.ppo.model import ActorCritic, PolicyOutput
from rlmem.agents.ppo.update import PPO, _float64_row
from rlmem.cells import CELLS, State, cell_config
from rlmem.envs import make_env, make_vector_env

GAMMA, LAMBDA = 0.9, 0.8


def test_gae_by_hand_with_termination_and_truncation() -> None:
    # One env, 4 steps: terminated at t=1, truncated at t=2 (final obs worth 10), then t=3.
    rewards = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
    values = torch.tensor([[0.5], [0.6], [0.7], [0.8]])
    terminated = torch.tensor([[False], [True], [False], [False]])
    truncated = torch.tensor([[False], [False], [True], [False]])
    final_values = torch.tensor([[99.0], [99.0], [10.0], [99.0]])
    last_values = torch.tensor([2.0])
    advantages, returns = compute_gae(rewards, values, terminated, truncated, final_values,
                                      last_values, GAMMA, LAMBDA)
    delta3 = 4.0 + GAMMA * 2.0 - 0.8            # bootstrap from the value after the rollout
    delta2 = 3.0 + GAMMA * 10.0 - 0.7           # truncated: bootstrap from the final obs
    delta1 = 2.0 + 0.0 - 0.6                    # terminated: no future
    delta0 = 1.0 + GAMMA * 0.6 - 0.5
    expected = [delta0 + GAMMA * LAMBDA * delta1, delta1, delta2, delta3]
    assert advantages.squeeze(1).tolist() == pytest.approx(expected)
    assert returns.squeeze(1).tolist() == pytest.approx(
        [a + v for a, v in zip(expected, [0.5, 0.6, 0.7, 0.8], strict=True)])


def test_gae_treats_envs_independently() -> None:
    steps, batch = 5, 3
    generator = torch.Generator().manual_seed(0)
    rewards, values = (torch.rand(steps, batch, generator=generator) for _ in range(2))
    done = torch.rand(steps, batch, generator=generator) < 0.3
    cut = torch.rand(steps, batch, generator=generator) < 0.3
    final, last = torch.rand(steps, batch, generator=generator), torch.rand(batch)
    together, _ = compute_gae(rewards, values, done, cut, final, last, GAMMA, LAMBDA)
    for b in range(batch):
        alone, _ = compute_gae(rewards[:, b:b + 1], values[:, b:b + 1], done[:, b:b + 1],
                               cut[:, b:b + 1], final[:, b:b + 1], last[b:b + 1], GAMMA, LAMBDA)
        assert torch.allclose(alone.squeeze(1), together[:, b])


def _envs(max_steps: list[int]) -> gym.vector.VectorEnv:
    """DoorKey-5x5 envs with these time limits: a short one resets often beside long ones."""
    return make_vector_env("DoorKey-5x5", len(max_steps), env_fns=[
        functools.partial(make_env, "DoorKey-5x5", max_steps=steps) for steps in max_steps])


def _model(name: str, envs: gym.vector.VectorEnv) -> ActorCritic:
    torch.manual_seed(0)
    memory = OmegaConf.structured(cell_config(name))
    memory.hidden_size = 16
    assert isinstance(envs.single_action_space, gym.spaces.Discrete)
    return ActorCritic(envs.single_observation_space, int(envs.single_action_space.n), memory)


def _alone(model: ActorCritic, observations: dict[str, torch.Tensor], resets: torch.Tensor,
           b: int) -> torch.Tensor:
    """Values of env ``b``'s observations replayed in a batch of one."""
    with torch.no_grad():
        return model({key: value[:, b:b + 1] for key, value in observations.items()},
                     model.initial_state(1), resets[:, b:b + 1]).value[:, 0]


@pytest.mark.parametrize("name", sorted(CELLS))
def test_a_reset_never_touches_another_envs_memory(name: str) -> None:
    envs = _envs([3, 1000, 7])
    model = _model(name, envs)
    collector = RolloutCollector(envs, model, torch.device("cpu"), seed=0)
    rollout = collector.collect(steps=24, recurrence=8)

    # Resets mark exactly the first observation of each episode, and env 0 resets often.
    done = rollout.terminated | rollout.truncated
    assert rollout.resets[0].all()
    assert torch.equal(rollout.resets[1:], done[:-1])
    assert rollout.resets[1:, 0].sum() >= 6 and not rollout.resets[1:, 1].any()

    # Rollout: every env's values are what it would get alone, with only its own resets.
    for b in range(envs.num_envs):
        alone = _alone(model, rollout.observations, rollout.resets, b)
        assert torch.allclose(alone, rollout.values[:, b], atol=1e-5), (name, b)

    # Update: chunks replayed from their stored states, mixed across envs in minibatches,
    # reproduce the rollout's log-probabilities exactly before any weight changes.
    config = OmegaConf.structured(PPOConfig(recurrence=8, batch_size=16, epochs=1,
                                            entropy_coef=0.01))
    ppo = PPO(model, config)
    for group in ppo.optimizer.param_groups:
        group["lr"] = 0.0
    metrics = ppo.update(rollout)
    assert metrics["ppo/approx_kl"] < 1e-9 and metrics["ppo/clip_fraction"] == 0.0
    envs.close()


def test_evaluation_keeps_each_envs_memory_apart() -> None:
    envs = _envs([3, 1000])
    model = _model("relstm", envs)
    calls: list[tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]] = []

    class Spy(torch.nn.Module):
        def initial_state(self, batch: int, device: torch.device | str | None = None) -> State:
            return model.initial_state(batch, device)

        def forward(self, observation: dict[str, torch.Tensor], state: State,
                    resets: torch.Tensor) -> PolicyOutput:
            out = model(observation, state, resets)
            calls.append((observation, resets, out.value))
            return out

    actor = PPOActor(Spy(), torch.device("cpu"))  # type: ignore[arg-type]
    result, _ = evaluate_policy(actor, envs, episodes=4, greedy=True, seed=0, quotas=[4, 0])
    assert result.episodes == 4 and result.length_mean == 3
    observations = {key: torch.cat([c[0][key] for c in calls]) for key in calls[0][0]}
    resets = torch.cat([c[1] for c in calls])
    values = torch.cat([c[2] for c in calls])
    for b in range(2):
        assert torch.allclose(_alone(model, observations, resets, b), values[:, b], atol=1e-5)
    envs.close()


def test_episode_quotas() -> None:
    for episodes, envs, first in [(100, 16, 0), (10, 4, 5), (3, 8, 0), (5, 1, 2)]:
        quotas = episode_quotas(episodes, envs, first)
        assert sum(quotas) == episodes and len(quotas) == envs
        assert quotas[0] >= min(first, episodes)
        assert max(quotas[1:], default=0) - min(quotas[1:], default=0) <= 1


@pytest.mark.parametrize("key, value, match", [
    ("recurrence", 0, "agent.recurrence must be positive"),
    ("recurrence", 48, "frames_per_env=128 must be a multiple of agent.recurrence=48"),
    ("batch_size", 100, "batch_size=100 must be a multiple"),
    ("gamma", 1.5, r"agent.gamma must be in \[0, 1\]"),
    ("lr", 0.0, "agent.lr must be positive"),
    ("entropy_coef", -0.01, "agent.entropy_coef must be non-negative"),
])
def test_bad_ppo_hyperparameters(key: str, value: float, match: str) -> None:
    config = OmegaConf.structured(PPOConfig(frames_per_env=128))
    config[key] = value
    with pytest.raises(ValueError, match=match):
        OmegaConf.to_object(config)  # the config checks itself as it is built


def test_a_minibatchs_statistics_enter_the_update_sums_exactly_as_float64() -> None:
    """One stack per minibatch holds each statistic as a float64 scalar of it would: a float32
    tensor widened, a Python float as Python holds it (not rounded through float32), an integer
    count, a one-element tensor."""
    row = _float64_row([torch.tensor(0.1), 0.1, torch.tensor(3), torch.tensor([2.5])],
                       torch.device("cpu"))
    assert row.dtype == torch.float64
    assert row.tolist() == [torch.tensor(0.1).item(), 0.1, 3.0, 2.5]
    assert row[0].item() != 0.1  # the float32 value, widened exactly

"""``agent.reward_scale``: the update learns from the rewards times the scale; the rollout (and
so the logged returns) keeps the env's."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo import update as ppo_update
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.model import ActorCritic
from rlmem.cells import cell_config
from rlmem.envs import make_vector_env


@pytest.mark.parametrize("scale", [1.0, 48.0])
def test_the_update_learns_from_scaled_rewards(scale: float,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    envs = make_vector_env("CartPole-v1", 2)
    torch.manual_seed(0)
    memory: Any = OmegaConf.structured(cell_config("gru"))
    memory.hidden_size = 4
    model = ActorCritic(envs.single_observation_space, envs.single_action_space, memory,
                        head_size=4)
    rollout = RolloutCollector(envs, model, torch.device("cpu"), seed=0).collect(8, 8)
    envs.close()
    seen: list[torch.Tensor] = []
    real_gae = ppo_update.compute_gae

    def spy(rewards: torch.Tensor, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        seen.append(rewards.clone())
        return real_gae(rewards, *args)

    monkeypatch.setattr(ppo_update, "compute_gae", spy)
    config = OmegaConf.to_object(OmegaConf.structured(PPOConfig(
        recurrence=8, batch_size=16, epochs=1, reward_scale=scale, entropy_coef=0.01)))
    assert isinstance(config, PPOConfig)
    ppo_update.PPO(model, config).update(rollout)
    assert torch.equal(rollout.rewards, torch.ones(8, 2))  # CartPole pays 1 a step
    assert torch.equal(seen[0], torch.full((8, 2), scale))


def test_the_scale_must_be_positive() -> None:
    config = OmegaConf.structured(PPOConfig())
    config.reward_scale = 0.0
    with pytest.raises(ValueError, match=r"agent\.reward_scale must be positive"):
        OmegaConf.to_object(config)

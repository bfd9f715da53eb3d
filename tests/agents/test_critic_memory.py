"""``agent.shared_memory=false``: the critic's own memory cell (sb3-contrib's
``enable_critic_lstm``), against values worked out from the cells themselves."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
import torch
from omegaconf import OmegaConf

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.collector import RolloutCollector
from rlmem.agents.ppo.critic_memory import pair_states, split_state
from rlmem.agents.ppo.model import ActorCritic
from rlmem.agents.ppo.rollout import select_state, stack_states
from rlmem.agents.ppo.update import PPO
from rlmem.cells import Aux, cell_config
from rlmem.envs import make_vector_env

OBSERVATION = gym.spaces.Box(-1.0, 1.0, (3,))
STEPS, BATCH = 5, 2


def _model(cell: str = "lstm", shared_memory: bool = False, seed: int = 0) -> ActorCritic:
    torch.manual_seed(seed)
    memory: Any = OmegaConf.structured(cell_config(cell))
    memory.hidden_size = 8
    return ActorCritic(OBSERVATION, 2, memory, head_size=8, shared_memory=shared_memory)


def _inputs(seed: int = 1) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    observation = torch.rand(STEPS, BATCH, 3, generator=generator) * 2 - 1
    resets = torch.zeros(STEPS, BATCH, dtype=torch.bool)
    resets[0] = True
    resets[3, 1] = True  # env 1 starts a new episode inside the sequence
    return {"observation": observation}, resets


def test_the_actor_and_the_critic_each_read_their_own_cell() -> None:
    model = _model()
    assert model.critic_memory is not None and not model.shared_memory
    observation, resets = _inputs()
    state = model.initial_state(BATCH)
    out = model(observation, state, resets)

    # By hand: the encoded observation through each cell from zeros, then each head.
    features = getattr(model, model.field_modules["observation"])(
        observation["observation"].flatten(0, 1)).view(STEPS, BATCH, -1)
    actor_state, critic_state = split_state(state, *model._state_types)
    actor_y, actor_end = model.memory(features, actor_state, resets)
    critic_y, critic_end = model.critic_memory(features, critic_state, resets)
    assert torch.allclose(out.action_params, model.actor(actor_y))
    assert torch.allclose(out.value, model.critic(critic_y).squeeze(-1))
    assert all(torch.equal(a, b) for a, b in zip(out.state, pair_states(actor_end, critic_end),
                                                 strict=True))
    assert out.state._fields == ("actor_h", "actor_c", "critic_h", "critic_c")


def test_the_value_loss_never_reaches_the_actors_cell_nor_the_policy_the_critics() -> None:
    model = _model()
    observation, resets = _inputs()
    for loss_of, silent, trained in ((lambda out: out.value.pow(2).sum(), "memory.",
                                      "critic_memory."),
                                     (lambda out: out.action_params.pow(2).sum(),
                                      "critic_memory.", "memory.")):
        model.zero_grad(set_to_none=True)
        loss_of(model(observation, model.initial_state(BATCH), resets)).backward()
        grads = {name: parameter.grad for name, parameter in model.named_parameters()}
        assert all(grad is None or not grad.any() for name, grad in grads.items()
                   if name.startswith(silent)), silent
        assert any(grad is not None and grad.any() for name, grad in grads.items()
                   if name.startswith(trained)), trained
        # The shared encoder learns from both losses, as sb3-contrib's shared extractor does.
        assert any(grad is not None and grad.any() for name, grad in grads.items()
                   if name.startswith("observation."))


def test_a_shared_memory_model_is_the_model_it_was() -> None:
    """The default keeps rl-starter-files' model: no second cell, the same weights from the
    same seed, a single cell's state."""
    shared = _model(shared_memory=True)
    torch.manual_seed(0)
    memory: Any = OmegaConf.structured(cell_config("lstm"))
    memory.hidden_size = 8
    before = ActorCritic(OBSERVATION, 2, memory, head_size=8)
    assert shared.critic_memory is None and shared.shared_memory
    assert list(shared.state_dict()) == list(before.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(shared.state_dict().values(),
                                                 before.state_dict().values(), strict=True))
    assert shared.initial_state(BATCH)._fields == ("h", "c")
    separate = _model()
    assert [name for name in separate.state_dict() if name not in before.state_dict()] == [
        name.replace("memory.", "critic_memory.", 1) for name in before.state_dict()
        if name.startswith("memory.")]


def test_the_paired_state_travels_as_one_state() -> None:
    model = _model()
    state = model.initial_state(3)
    state = state._make(torch.rand_like(value) for value in state)
    picked: Any = select_state(state, torch.tensor([2, 0]))
    fields: Any = state
    assert picked._fields == state._fields
    assert torch.equal(picked.critic_c, fields.critic_c[[2, 0]])
    stacked: Any = stack_states([state, state])
    assert stacked._fields == state._fields
    assert stacked.actor_h.shape == (2, *fields.actor_h.shape)
    with pytest.raises(ValueError, match="shared_memory=false"):
        observation, resets = _inputs()
        model(observation, model.memory.initial_state(BATCH), resets)  # a single cell's state


def test_the_critic_cells_aux_losses_are_trained_under_its_own_names() -> None:
    model = _model("sarnn")
    observation, resets = _inputs()
    out = model(observation, model.initial_state(BATCH), resets)
    assert isinstance(out.aux, Aux)
    actor_only = model.memory.forward_aux(
        getattr(model, model.field_modules["observation"])(
            observation["observation"].flatten(0, 1)).view(
            STEPS, BATCH, -1), split_state(model.initial_state(BATCH),
                                           *model._state_types)[0], resets).aux
    assert set(out.aux.losses) == set(actor_only.losses) | {
        f"critic/{key}" for key in actor_only.losses}
    assert any(key.startswith("critic/") for key in out.aux.diagnostics)


def test_chunks_replay_the_rollout_with_the_critics_state_too() -> None:
    """The critic's state is stored at every chunk start as the actor's is: replaying the
    rollout's chunks before any weight changes gives its log-probabilities and values back,
    so PPO's first step sees a ratio of exactly 1 and no value change."""
    envs = make_vector_env("CartPole-v1", 2)
    torch.manual_seed(0)
    memory: Any = OmegaConf.structured(cell_config("gru"))
    memory.hidden_size = 8
    model = ActorCritic(envs.single_observation_space, envs.single_action_space, memory,
                        head_size=8, shared_memory=False)
    rollout = RolloutCollector(envs, model, torch.device("cpu"), seed=0).collect(32, 8)
    assert rollout.resets[1:].any()  # CartPole's random policy ends episodes within 32 steps
    assert rollout.chunk_states is not None and "critic_h" in rollout.chunk_states._fields
    config = OmegaConf.to_object(OmegaConf.structured(PPOConfig(
        recurrence=8, batch_size=16, epochs=1, shared_memory=False, normalize_advantage=True,
        reward_scale=1.0, entropy_coef=0.0)))
    assert isinstance(config, PPOConfig)
    chunks = rollout.chunks(rollout.values, rollout.values)
    out = model(chunks.observations, chunks.start_state, chunks.resets)
    assert torch.allclose(out.value, chunks.old_values, atol=1e-6)
    ppo = PPO(model, config)
    for group in ppo.optimizer.param_groups:
        group["lr"] = 0.0
    metrics = ppo.update(rollout)
    assert metrics["ppo/approx_kl"] < 1e-9 and metrics["ppo/clip_fraction"] == 0.0
    envs.close()

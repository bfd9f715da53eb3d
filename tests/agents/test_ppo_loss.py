"""``ppo_loss`` against the PPO paper's clipped objective worked out by hand, and the rollout's
chunk layout that feeds it."""

from __future__ import annotations

import math
from typing import NamedTuple

import pytest
import torch
from gymnasium import spaces

from rlmem.agents.ppo import PPOConfig
from rlmem.agents.ppo.heads import CategoricalHead
from rlmem.agents.ppo.loss import ppo_loss
from rlmem.agents.ppo.model import PolicyOutput
from rlmem.agents.ppo.rollout import ChunkBatch, Rollout
from rlmem.cells import Aux

# Two steps of one chunk. Step 0: uniform over two actions, action 0 taken (pi = 1/2) where the
# rollout policy gave it 1/4, so r = 2; step 1: pi(0) = 3/4, action 1 taken (pi = 1/4) where the
# rollout gave it 1/2, so r = 1/2.
PI = [0.5, 0.25]
OLD_PI = [0.25, 0.5]
ADVANTAGES = [1.0, -2.0]
VALUES, OLD_VALUES, RETURNS = [1.0, 0.0], [0.5, 0.5], [2.0, 0.3]
ENTROPIES = [math.log(2), -(0.75 * math.log(0.75) + 0.25 * math.log(0.25))]


class State(NamedTuple):
    """A memory state of one field."""

    h: torch.Tensor


class NoState(NamedTuple):
    """The state of a memory without fields, ``()``: the loss never reads the state."""


def _case(logits: torch.Tensor | None = None, aux: Aux | None = None
          ) -> tuple[PolicyOutput, ChunkBatch]:
    logits = torch.tensor([[[0.0, 0.0]], [[math.log(3.0), 0.0]]]) if logits is None else logits
    column = [[value] for value in ADVANTAGES]  # (L=2, N=1)
    batch = ChunkBatch(observations={}, resets=torch.tensor([[True], [False]]),
                       start_state=NoState(), actions=torch.tensor([[0], [1]]),
                       old_log_probs=torch.tensor([[math.log(p)] for p in OLD_PI]),
                       old_values=torch.tensor([[v] for v in OLD_VALUES]),
                       advantages=torch.tensor(column),
                       returns=torch.tensor([[r] for r in RETURNS]))
    head = CategoricalHead(spaces.Discrete(2))
    return (PolicyOutput(logits, torch.tensor([[v] for v in VALUES]), NoState(), aux or Aux(),
                         head), batch)


def _clipped_objective(advantages: list[float], epsilon: float) -> float:
    """L^CLIP (eq. 7 of Schulman et al., 2017), by hand."""
    terms = []
    for pi, old, advantage in zip(PI, OLD_PI, advantages, strict=True):
        ratio = pi / old
        clipped = min(max(ratio, 1 - epsilon), 1 + epsilon)
        terms.append(min(ratio * advantage, clipped * advantage))
    return sum(terms) / len(terms)


@pytest.mark.parametrize("clip_value", [True, False])
def test_the_loss_is_the_papers_clipped_objective(clip_value: bool) -> None:
    config = PPOConfig(clip=0.2, entropy_coef=0.01, value_coef=0.5, clip_value=clip_value)
    loss, stats = ppo_loss(*_case(), config)

    policy = -_clipped_objective(ADVANTAGES, 0.2)  # both ratios clipped: -(1.2 - 1.6) / 2
    entropy = sum(ENTROPIES) / 2
    squared = [(v - r) ** 2 for v, r in zip(VALUES, RETURNS, strict=True)]
    if clip_value:  # V_old + clip(V - V_old, -eps, eps), the larger error of the two
        clipped = [(old + min(max(v - old, -0.2), 0.2) - r) ** 2
                   for v, old, r in zip(VALUES, OLD_VALUES, RETURNS, strict=True)]
        squared = [max(a, b) for a, b in zip(squared, clipped, strict=True)]
    value = sum(squared) / 2
    assert float(stats["loss/policy"]) == pytest.approx(policy)
    assert float(stats["loss/entropy"]) == pytest.approx(entropy)
    assert float(stats["loss/value"]) == pytest.approx(value)
    assert float(loss) == pytest.approx(policy - 0.01 * entropy + 0.5 * value)
    assert float(stats["loss/total"]) == float(loss)
    ratios = [pi / old for pi, old in zip(PI, OLD_PI, strict=True)]
    assert float(stats["ppo/approx_kl"]) == pytest.approx(
        sum((r - 1) - math.log(r) for r in ratios) / 2)
    assert float(stats["ppo/clip_fraction"]) == 1.0


def test_normalised_advantages_and_the_cells_own_loss() -> None:
    config = PPOConfig(clip=0.2, normalize_advantage=True, entropy_coef=0.0, value_coef=0.0)
    aux = Aux(losses={"budget": torch.tensor(0.3)}, diagnostics={"skip": torch.tensor(0.7)})
    loss, stats = ppo_loss(*_case(aux=aux), config)
    mean = sum(ADVANTAGES) / 2
    std = math.sqrt(sum((a - mean) ** 2 for a in ADVANTAGES) / (len(ADVANTAGES) - 1))
    normalised = [(a - mean) / (std + 1e-8) for a in ADVANTAGES]
    assert float(stats["loss/policy"]) == pytest.approx(-_clipped_objective(normalised, 0.2))
    assert float(loss) == pytest.approx(-_clipped_objective(normalised, 0.2) + 0.3)
    assert float(stats["loss/memory_aux"]) == pytest.approx(0.3)
    assert float(stats["memory/skip"]) == pytest.approx(0.7)


def test_an_undecided_entropy_coefficient_is_refused_by_name() -> None:
    """entropy_coef is null until the run's preset decides it: the loss never guesses it."""
    with pytest.raises(ValueError, match=r"agent\.entropy_coef is null"):
        ppo_loss(*_case(), PPOConfig(clip=0.2, value_coef=0.5))


@pytest.mark.parametrize(("epsilon", "moves"), [(0.2, False), (1.5, True)])
def test_a_clipped_ratio_gives_the_policy_no_gradient(epsilon: float, moves: bool) -> None:
    """Both ratios leave [1 - 0.2, 1 + 0.2] in the direction the advantage favours, so the
    clipped term is the minimum and is constant in theta; with a clip range of 1.5 neither is
    clipped and the policy gets a gradient."""
    logits = torch.tensor([[[0.0, 0.0]], [[math.log(3.0), 0.0]]], requires_grad=True)
    config = PPOConfig(clip=epsilon, entropy_coef=0.0, value_coef=0.0)
    loss, _ = ppo_loss(*_case(logits=logits), config)
    (gradient,) = torch.autograd.grad(loss, logits)
    assert bool(gradient.abs().sum() > 0) == moves


def test_a_rollout_is_cut_into_whole_chunks_dealt_out_at_random() -> None:
    steps, envs, length = 6, 2, 3
    index = torch.arange(steps * envs, dtype=torch.float32).view(steps, envs)  # envs * t + b
    state = State(torch.arange(steps // length * envs).view(steps // length, envs))
    rollout = Rollout(observations={"x": index}, resets=torch.zeros(steps, envs, dtype=torch.bool),
                      actions=index.long(), log_probs=index, values=index, rewards=index,
                      terminated=index.bool(), truncated=index.bool(), final_values=index,
                      last_values=index[0], recurrence=length, chunk_states=state)
    chunks = rollout.chunks(advantages=index + 100, returns=index + 200)
    assert chunks.num_chunks == steps // length * envs
    for column in range(chunks.num_chunks):
        k, b = divmod(column, envs)  # chunk k of env b
        expected = index[k * length:(k + 1) * length, b]
        assert torch.equal(chunks.observations["x"][:, column], expected)
        assert torch.equal(chunks.advantages[:, column], expected + 100)
        assert torch.equal(chunks.returns[:, column], expected + 200)
        assert isinstance(chunks.start_state, State)
        assert int(chunks.start_state.h[column]) == int(state.h[k, b])
    seen = []
    for batch in chunks.minibatches(batch_size=2 * length):
        assert batch.resets.shape == (length, 2)
        assert isinstance(batch.start_state, State)
        seen += batch.start_state.h.tolist()
    assert sorted(seen) == list(range(chunks.num_chunks))

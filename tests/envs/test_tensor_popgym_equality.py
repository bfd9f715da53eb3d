"""(a) POPGym's envs and their tensor versions, from the same state, with the same random
actions: the same observations, rewards, ends and final observations, across auto-resets
(:func:`tensor_popgym_check.lockstep`). Every difficulty; a short run of about 1,000 env steps
in the default suite, 10,000 or more in ``slow``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensor_popgym_check import PHYSICS, Tolerance, fields, lockstep

from rlmem.envs.tensor.popgym import POPGYM_TENSOR_ENVS

pytest.importorskip("popgym")

NAMES = sorted(POPGYM_TENSOR_ENVS)
NUM_ENVS = 8

TOLERANCES = {f"{family}{level}": PHYSICS
              for family in ("PositionOnlyCartPole", "PositionOnlyPendulum")
              for level in ("Easy", "Medium", "Hard")}
"""The envs whose floats may differ from POPGym's (all others: equal)."""


def check(name: str, steps: int) -> int:
    family = POPGYM_TENSOR_ENVS[name].family

    def make(envs: list[gym.Env[Any, Any]]) -> Any:
        return family.from_reference(envs)

    original: Any = gym.make(f"popgym:popgym-{name}-v0").unwrapped
    # HigherLower has no max_episode_length: its episodes are a deck long.
    episode = getattr(original, "max_episode_length", None) or original.deck_size
    return lockstep(name, make, num_envs=NUM_ENVS, steps=steps, warmup=episode,
                    tolerance=TOLERANCES.get(name, Tolerance()))


@pytest.mark.parametrize("name", NAMES)
def test_each_name_is_popgyms_env_at_its_difficulty(name: str) -> None:
    """The registry's arguments are those of POPGym's class of that name, and the spaces
    POPGym's."""
    factory = POPGYM_TENSOR_ENVS[name]
    original = gym.make(f"popgym:{factory.id}")
    tensor = factory(3)
    assert factory.family.parameters_of(original.unwrapped) == factory.arguments
    assert tensor.single_observation_space == original.observation_space
    assert tensor.single_action_space == original.action_space
    assert tensor.num_envs == 3


def test_what_cannot_be_copied_or_made_is_refused() -> None:
    factory = POPGYM_TENSOR_ENVS["RepeatFirstEasy"]
    with pytest.raises(ValueError, match="MiniGrid"):
        factory(2, mission=True)
    with pytest.raises(ValueError, match="copies POPGym's RepeatFirst, not RepeatPrevious"):
        factory.family.from_reference([gym.make("popgym:popgym-RepeatPreviousEasy-v0")])
    noisy = gym.make("popgym:popgym-NoisyPositionOnlyCartPoleEasy-v0")
    with pytest.raises(ValueError, match="not NoisyPositionOnlyCartPoleEasy"):
        POPGYM_TENSOR_ENVS["PositionOnlyCartPoleEasy"].family.from_reference([noisy])
    easy, hard = (gym.make(f"popgym:popgym-RepeatFirst{level}-v0") for level in ("Easy", "Hard"))
    for env in (easy, hard):
        env.reset(seed=0)
    with pytest.raises(ValueError, match="differ in difficulty"):
        factory.family.from_reference([easy, hard])


@pytest.mark.parametrize("name", NAMES)
def test_the_tensor_env_steps_as_popgyms(name: str) -> None:
    assert check(name, 1000 // NUM_ENVS) > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_the_tensor_env_steps_as_popgyms_for_10000_steps(name: str) -> None:
    assert check(name, 10_000 // NUM_ENVS) > NUM_ENVS


@pytest.mark.parametrize("name", ["RepeatPreviousEasy", "CountRecallMedium", "AutoencodeEasy",
                                  "BattleshipEasy", "PositionOnlyCartPoleEasy"])
def test_each_env_follows_its_own_seed(name: str) -> None:
    """Per-env seeds: copy 1 of a batch seeded ``[5, 6, 7]`` lives the same episodes, through
    its auto-resets, as a batch of one seeded ``[6]`` given the same actions."""
    batch, alone = POPGYM_TENSOR_ENVS[name](3), POPGYM_TENSOR_ENVS[name](1)

    def assert_alike(many: Any, one: Any) -> None:
        first, second = fields(many), fields(one)
        assert all(np.array_equal(first[key][1:2], second[key]) for key in first)

    assert_alike(batch.reset(seed=[5, 6, 7])[0], alone.reset(seed=[6])[0])
    batch.action_space.seed(0)
    ended = 0
    for _ in range(250):
        actions = torch.as_tensor(batch.action_space.sample())
        many, one = batch.step(actions), alone.step(actions[1:2])
        assert_alike(many[0], one[0])
        assert all(torch.equal(got[1:2], want)
                   for got, want in zip(many[1:4], one[1:4], strict=True))
        ended += int(one[2].item() or one[3].item())
    assert ended > 0

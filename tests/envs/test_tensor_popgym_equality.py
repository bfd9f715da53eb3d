"""(a) POPGym's envs and their tensor versions, from the same state, with the same random
actions: the same observations, rewards, ends and final observations, across auto-resets
(:func:`tensor_popgym_check.lockstep`). Every difficulty; a short run of about 1,000 env steps
in the default suite, 10,000 or more in ``slow``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import pytest
from tensor_popgym_check import Tolerance, lockstep

from rlmem.envs.tensor.popgym import POPGYM_TENSOR_ENVS

pytest.importorskip("popgym")

NAMES = sorted(POPGYM_TENSOR_ENVS)
NUM_ENVS = 8

PHYSICS = Tolerance(observation=1e-6, reward=1e-12)
"""CartPole's and Pendulum's: torch's float64 sine and cosine differ from NumPy's in the last
bit for about one argument in a thousand (the rest of the step is the same operations in the
same order and dtypes), and the difference stays near that size over an episode: an
observation rounded to float32 may then differ by one float32 step (below 5e-7 for CartPole's
|x| < 4.8), a float64 reward by a few float64 steps."""

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

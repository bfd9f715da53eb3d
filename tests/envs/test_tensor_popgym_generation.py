"""(b) The tensor POPGym envs start their episodes as POPGym's do, in distribution: the states
after reset of POPGym's env (seeds ``0 .. R-1``) and of the tensor env (its own seeds), read
by the same features, pass a two-sample test each (:func:`tensor_popgym_check.generation_p_values`:
chi-squared for categories, Kolmogorov-Smirnov for reals), at every difficulty. A negative
control, the tensor env with a biased generator, fails them (at Easy, 1,000 resets). R is
500 in the default suite, 10,000 in ``slow``. The seeds are fixed, so each test's outcome is
too."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from tensor_popgym_check import Biased, Features, generation_p_values, reference_states

from rlmem.envs.tensor.popgym import (
    POPGYM_TENSOR_ENVS,
    Autoencode,
    Battleship,
    CountRecall,
    HigherLower,
    PopgymTensorEnv,
    PositionOnlyCartPole,
    PositionOnlyPendulum,
    RepeatFirst,
    RepeatPrevious,
)
from rlmem.envs.tensor.popgym.deck import CARDS_PER_DECK, suit

pytest.importorskip("popgym")

ALPHA = 1e-3
"""Each feature's test rejects at this level."""
BINS = 16
"""Bins of a card's position in its deck."""


def deck_features(order: torch.Tensor, prefix: str = "") -> dict[str, np.ndarray]:
    """A deck order's features: the first card dealt (which of a deck's 52, and from which
    deck), the suits of the first two, where card 0 lies."""
    cards = order.shape[1]
    first, second = order[:, -1], order[:, -2]
    position = (order == 0).to(torch.int64).argmax(1) * BINS // cards
    features = {"first card": first % CARDS_PER_DECK, "first deck": first // CARDS_PER_DECK,
                "first two suits": suit(first) * 4 + suit(second), "card 0 at": position}
    return {prefix + key: value.numpy() for key, value in features.items()}


def one_deck(env: PopgymTensorEnv) -> dict[str, np.ndarray]:
    return deck_features(env.order)  # type: ignore[attr-defined]


def two_decks(env: PopgymTensorEnv) -> dict[str, np.ndarray]:
    assert isinstance(env, CountRecall)
    values, queries = deck_features(env.values, "value "), deck_features(env.queries, "query ")
    kinds = env.kind(env.values[:, -1]) * 13 + env.kind(env.queries[:, -1])
    return {**values, **queries, "first kinds": kinds.numpy()}


def ships(env: PopgymTensorEnv) -> dict[str, np.ndarray]:
    assert isinstance(env, Battleship)
    board = env.board.flatten(1).to(torch.int64)
    middle = env.board_size // 2
    centre = env.board[:, middle - 1:middle + 1, middle - 1:middle + 1].flatten(1)
    across = (env.board[:, :, 1:] & env.board[:, :, :-1]).sum((1, 2))
    return {"first cell": board.argmax(1).numpy(), "last cell": board.flip(1).argmax(1).numpy(),
            "centre": (centre.to(torch.int64) * torch.tensor([1, 2, 4, 8])).sum(1).numpy(),
            "pairs across": across.numpy()}


def physics(env: PopgymTensorEnv) -> dict[str, np.ndarray]:
    state = env.state.numpy()  # type: ignore[attr-defined]
    return {f"state {index}": state[:, index] for index in range(state.shape[1])}


FEATURES: dict[type[PopgymTensorEnv], Features] = {
    RepeatPrevious: one_deck, RepeatFirst: one_deck, HigherLower: one_deck,
    Autoencode: one_deck, CountRecall: two_decks, Battleship: ships,
    PositionOnlyCartPole: physics, PositionOnlyPendulum: physics}


def p_values(name: str, count: int,
             bias: Callable[[PopgymTensorEnv], None] | None = None) -> dict[str, float]:
    family = POPGYM_TENSOR_ENVS[name].family
    reference = reference_states(name, count, family)
    tensor = POPGYM_TENSOR_ENVS[name](count)
    if bias is not None:
        bias(tensor)
    tensor.reset(seed=12345)
    return generation_p_values(reference, tensor, FEATURES[family])


def biased(env: PopgymTensorEnv) -> None:
    env._draws = Biased(env, tilt=2.0)  # type: ignore[method-assign]


@pytest.mark.parametrize("name", sorted(POPGYM_TENSOR_ENVS))
def test_the_tensor_env_starts_episodes_as_popgyms(name: str) -> None:
    values = p_values(name, 500)
    assert min(values.values()) > ALPHA, values


@pytest.mark.parametrize("name", sorted(name for name in POPGYM_TENSOR_ENVS
                                        if name.endswith("Easy")))
def test_a_biased_generator_fails(name: str) -> None:
    values = p_values(name, 1000, biased)
    assert min(values.values()) < ALPHA, values


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(POPGYM_TENSOR_ENVS))
def test_the_tensor_env_starts_10000_episodes_as_popgyms(name: str) -> None:
    values = p_values(name, 10_000)
    assert min(values.values()) > ALPHA, values

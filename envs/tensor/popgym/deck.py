"""POPGym's deck of cards (``popgym.core.deck.Deck``) as tensors: each env's deck order and how
many cards are left in it.

POPGym's ``Deck(num_decks)`` holds ``C = 52 * num_decks`` cards numbered ``0 .. C-1``; card
``j`` has suit ``j % 4``, rank ``(j % 52) // 4`` and colour ``j % 2`` (its ``suits_idx``,
``ranks_idx`` and ``colors_idx``). ``reset`` shuffles the numbers into ``idx``, the deck's order,
and ``deal`` hands out the cards from the end of ``idx``: with ``deck_len`` cards left, the next
card dealt is ``idx[deck_len - 1]``. So the ``n``-th card dealt (from 0) is ``idx[C - 1 - n]``,
and the card dealt last is ``idx[deck_len]``. A reference loop::

    hand = []
    for _ in range(n):
        deck_len -= 1
        hand.append(idx[deck_len])

A tensor env keeps ``order`` (``idx``, ``(N, C)``) and ``remaining`` (``deck_len``, ``(N,)``)
and reads a card with :func:`card_at`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv

CARDS_PER_DECK = 52
SUITS = 4
RANKS = 13
COLOURS = 2


def suit(card: Tensor) -> Tensor:
    """Each card's suit, 0..3 (POPGym's ``suits_idx``)."""
    return card % SUITS


def rank(card: Tensor) -> Tensor:
    """Each card's rank, 0 (ace) .. 12 (king) (POPGym's ``ranks_idx``)."""
    return (card % CARDS_PER_DECK) // SUITS


def colour(card: Tensor) -> Tensor:
    """Each card's colour, 0 or 1 (POPGym's ``colors_idx``)."""
    return card % COLOURS


def card_at(order: Tensor, position: Tensor) -> Tensor:
    """The card at ``position`` in each env's deck order (clamped into the deck, so that a
    position past either end, which the env does not use then, reads a card all the same).

    Shapes: ``order`` ``(N, C)``, ``position`` ``(N,)`` -> ``(N,)``.
    """
    clamped = position.clamp(0, order.shape[1] - 1).unsqueeze(1)
    return order.gather(1, clamped).squeeze(1)


def shuffled(draws: Tensor) -> Tensor:
    """A uniformly random deck order per env: the order that sorts one uniform draw per card.
    The draws are multiples of ``2**-32``; two equal draws (probability below
    ``C**2 / 2**33`` per shuffle: 3e-7 for a deck, 5e-6 for four) keep the cards' numbered
    order, as the sort is stable.

    Shapes: ``draws`` ``(N, C)`` -> ``(N, C)`` int64.
    """
    return torch.argsort(draws, dim=1, stable=True)


def copy_deck(deck: Any) -> tuple[Tensor, int]:
    """The order and the cards left of one POPGym ``Deck``."""
    return torch.as_tensor(np.asarray(deck.idx), dtype=torch.int64), int(deck.deck_len)


class DeckEnv(PopgymTensorEnv):
    """A POPGym env that deals one shuffled deck of ``num_decks`` decks, one card at reset: the
    state it keeps (``order``, ``remaining``), its generation and its copy from POPGym's
    ``env.deck``.

    Args:
        num_envs: copies.
        num_decks: decks shuffled together.
        observation_space, action_space: one copy's.
        device: where the state lives.
    """

    def __init__(self, num_envs: int, num_decks: int, observation_space: spaces.Space[Any],
                 action_space: spaces.Space[Any], device: torch.device | str) -> None:
        self.num_decks, self.cards = num_decks, CARDS_PER_DECK * num_decks
        super().__init__(num_envs, observation_space, action_space,
                         draws_per_episode=self.cards, device=device)
        self.order = torch.zeros(num_envs, self.cards, dtype=torch.int64, device=self.device)
        self.remaining = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        self.order = torch.where(envs.unsqueeze(1), shuffled(draws), self.order)
        self.remaining = torch.where(envs, self.cards - 1, self.remaining)

    def dealt_last(self) -> Tensor:
        """Each copy's card dealt last (``(N,)``)."""
        return card_at(self.order, self.remaining)

    @classmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        cls._check_original(env)
        return {"num_decks": int(env.deck.num_decks)}

    def _load(self, row: int, env: Any) -> None:
        order, remaining = copy_deck(env.deck)
        self.order[row], self.remaining[row] = order.to(self.device), remaining

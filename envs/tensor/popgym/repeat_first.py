"""POPGym's RepeatFirst as a tensor env: name the suit of the episode's first card, every step.

POPGym's ``RepeatFirst(num_decks)`` deals a shuffled deck of ``C = 52 * num_decks`` cards, one
per step, and observes the suit of the card just dealt. A reference loop of one episode
(``deck.py`` for the deck)::

    first = suit(deal())                              # reset: observe first
    while True:                                       # step(action)
        reward = +1 / (C - 1) if action == first else -1 / (C - 1)
        terminated = cards_left == 1
        card = deal()                                 # observe suit(card)

so an episode is ``C - 1`` steps. Easy: one deck; Medium: eight; Hard: sixteen.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.deck import (
    CARDS_PER_DECK,
    SUITS,
    card_at,
    copy_deck,
    shuffled,
    suit,
)
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv, scored


class RepeatFirst(PopgymTensorEnv):
    """POPGym's ``RepeatFirst(num_decks)`` for ``num_envs`` envs (module docstring).

    State: ``order`` ``(N, C)`` (each deck's order), ``remaining`` ``(N,)`` (cards left; the
    card dealt last is ``order[remaining]``) and ``first`` ``(N,)`` (the first card's suit).
    """

    def __init__(self, num_envs: int, num_decks: int = 1,
                 device: torch.device | str = "cpu") -> None:
        self.num_decks, self.cards = num_decks, CARDS_PER_DECK * num_decks
        suits = spaces.Discrete(SUITS)
        super().__init__(num_envs, suits, suits, draws_per_episode=self.cards, device=device)
        self.order = torch.zeros(num_envs, self.cards, dtype=torch.int64, device=self.device)
        self.remaining = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.first = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.scale = 1 / (self.cards - 1)

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        self.order = torch.where(envs.unsqueeze(1), shuffled(draws), self.order)
        self.remaining = torch.where(envs, self.cards - 1, self.remaining)
        self.first = torch.where(envs, self._observe(), self.first)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        reward = scored(actions == self.first, self.scale)
        terminated = self.remaining == 1
        self.remaining = self.remaining - 1
        return reward, terminated, torch.zeros_like(terminated)

    def _observe(self) -> Tensor:
        return suit(card_at(self.order, self.remaining))

    @classmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        cls._check_original(env, "RepeatFirst")
        return {"num_decks": int(env.deck.num_decks)}

    def _load(self, row: int, env: Any) -> None:
        order, remaining = copy_deck(env.deck)
        self.order[row], self.remaining[row] = order.to(self.device), remaining
        self.first[row] = int(env.card)

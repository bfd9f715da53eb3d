"""POPGym's HigherLower as a tensor env: guess whether the next card ranks higher or lower.

POPGym's ``HigherLower(num_decks)`` deals a shuffled deck of ``C = 52 * num_decks`` cards, one
per step, and observes the rank of the card just dealt. Action 0 guesses higher, 1 lower. A
reference loop of one episode (``deck.py`` for the deck)::

    card = deal()                                     # reset: observe rank(card)
    while True:                                       # step(action)
        terminated = cards_left <= 1
        current, card = card, deal()                  # observe rank(card)
        if rank(card) == rank(current):
            reward = 0
        elif (rank(card) > rank(current)) == (action == 0):
            reward = 1 / C
        else:
            reward = -1 / C

so an episode is ``C - 1`` steps. Easy: one deck; Medium: two; Hard: three.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.deck import (
    CARDS_PER_DECK,
    RANKS,
    card_at,
    copy_deck,
    rank,
    shuffled,
)
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv, scored

HIGHER = 0
"""The action that guesses higher."""


class HigherLower(PopgymTensorEnv):
    """POPGym's ``HigherLower(num_decks)`` for ``num_envs`` envs (module docstring).

    State: ``order`` ``(N, C)`` (each deck's order) and ``remaining`` ``(N,)`` (cards left;
    the card dealt last, the one shown, is ``order[remaining]``).
    """

    def __init__(self, num_envs: int, num_decks: int = 1,
                 device: torch.device | str = "cpu") -> None:
        self.num_decks, self.cards = num_decks, CARDS_PER_DECK * num_decks
        super().__init__(num_envs, spaces.Discrete(RANKS), spaces.Discrete(2),
                         draws_per_episode=self.cards, device=device)
        self.order = torch.zeros(num_envs, self.cards, dtype=torch.int64, device=self.device)
        self.remaining = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.scale = 1 / self.cards

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        self.order = torch.where(envs.unsqueeze(1), shuffled(draws), self.order)
        self.remaining = torch.where(envs, self.cards - 1, self.remaining)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        terminated = self.remaining <= 1
        current = self._observe()
        self.remaining = self.remaining - 1
        shown = self._observe()
        right = (shown > current) == (actions == HIGHER)
        reward = scored(right, self.scale)
        reward = torch.where(shown == current, 0.0, reward)
        return reward, terminated, torch.zeros_like(terminated)

    def _observe(self) -> Tensor:
        return rank(card_at(self.order, self.remaining))

    @classmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        cls._check_original(env, "HigherLower")
        return {"num_decks": int(env.num_decks)}

    def _load(self, row: int, env: Any) -> None:
        order, remaining = copy_deck(env.deck)
        if env.deck.hand_size("player") != 1:
            raise ValueError("HigherLower: POPGym's env holds more than one card; copy it "
                             "after reset or step")
        self.order[row], self.remaining[row] = order.to(self.device), remaining

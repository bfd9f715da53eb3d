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

from rlmem.envs.tensor.popgym.deck import RANKS, DeckEnv, rank
from rlmem.envs.tensor.popgym.popgym_env import scored

HIGHER = 0
"""The action that guesses higher."""


class HigherLower(DeckEnv):
    """POPGym's ``HigherLower(num_decks)`` for ``num_envs`` envs (module docstring).

    State: ``order`` ``(N, C)`` (each deck's order) and ``remaining`` ``(N,)`` (cards left;
    the card dealt last, the one shown, is ``order[remaining]``).
    """

    def __init__(self, num_envs: int, num_decks: int = 1,
                 device: torch.device | str = "cpu") -> None:
        super().__init__(num_envs, num_decks, spaces.Discrete(RANKS), spaces.Discrete(2),
                         device)
        self.scale = 1 / self.cards

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
        return rank(self.dealt_last())

    def _load(self, row: int, env: Any) -> None:
        if env.deck.hand_size("player") != 1:
            raise ValueError("HigherLower: POPGym's env holds more than one card; copy it "
                             "after reset or step")
        super()._load(row, env)

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

from rlmem.envs.tensor.popgym.deck import SUITS, DeckEnv, suit
from rlmem.envs.tensor.popgym.popgym_env import scored


class RepeatFirst(DeckEnv):
    """POPGym's ``RepeatFirst(num_decks)`` for ``num_envs`` envs (module docstring).

    State: ``order`` ``(N, C)`` (each deck's order), ``remaining`` ``(N,)`` (cards left; the
    card dealt last is ``order[remaining]``) and ``first`` ``(N,)`` (the first card's suit).
    """

    def __init__(self, num_envs: int, num_decks: int = 1,
                 device: torch.device | str = "cpu") -> None:
        suits = spaces.Discrete(SUITS)
        super().__init__(num_envs, num_decks, suits, suits, device)
        self.first = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.scale = 1 / (self.cards - 1)

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        super()._generate(envs, draws)
        self.first = torch.where(envs, self._observe(), self.first)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        reward = scored(actions == self.first, self.scale)
        terminated = self.remaining == 1
        self.remaining = self.remaining - 1
        return reward, terminated, torch.zeros_like(terminated)

    def _observe(self) -> Tensor:
        return suit(self.dealt_last())

    def _load(self, row: int, env: Any) -> None:
        super()._load(row, env)
        self.first[row] = int(env.card)

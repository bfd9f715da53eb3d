"""POPGym's RepeatPrevious as a tensor env: name the suit of the card dealt ``k`` steps ago.

POPGym's ``RepeatPrevious(num_decks, k)`` deals a shuffled deck of ``C = 52 * num_decks``
cards, one per step, and observes the suit of the card just dealt. A reference loop of one
episode (``deck.py`` for the deck)::

    hand = [deal()]                                  # reset: observe suit(hand[-1])
    while True:                                      # step(action)
        terminated = cards_left == 1
        if len(hand) >= k:
            reward = +1 / (C - k) if action == suit(hand[-k]) else -1 / (C - k)
        else:
            reward = 0
        hand.append(deal())                          # observe suit(hand[-1])

so an episode is ``C - 1`` steps, and the first ``k - 1`` are not scored. Easy: one deck,
``k = 4``; Medium: two, ``k = 32``; Hard: three, ``k = 64``.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.deck import CARDS_PER_DECK, SUITS, DeckEnv, card_at, suit
from rlmem.envs.tensor.popgym.popgym_env import scored


class RepeatPrevious(DeckEnv):
    """POPGym's ``RepeatPrevious(num_decks, k)`` for ``num_envs`` envs (module docstring).

    State: ``order`` ``(N, C)`` (each deck's order) and ``remaining`` ``(N,)`` (cards left);
    the hand is the cards past ``remaining`` in ``order``: ``hand[-m] = order[remaining + m - 1]``.
    """

    def __init__(self, num_envs: int, num_decks: int = 1, k: int = 4,
                 device: torch.device | str = "cpu") -> None:
        if not 0 < k < CARDS_PER_DECK * num_decks:
            raise ValueError(f"RepeatPrevious: k={k} must be in 1 .. "
                             f"{CARDS_PER_DECK * num_decks - 1} (the cards of {num_decks} "
                             "decks, less one)")
        self.k = k
        suits = spaces.Discrete(SUITS)
        super().__init__(num_envs, num_decks, suits, suits, device)
        self.scale = 1 / (self.cards - k)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        terminated = self.remaining == 1
        counted = self.cards - self.remaining >= self.k  # the hand holds k cards
        target = suit(card_at(self.order, self.remaining + self.k - 1))  # hand[-k]
        reward = scored(actions == target, self.scale)
        reward = torch.where(counted, reward, 0.0)
        self.remaining = self.remaining - 1
        return reward, terminated, torch.zeros_like(terminated)

    def _observe(self) -> Tensor:
        return suit(self.dealt_last())

    @classmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        return {**super().parameters_of(env), "k": int(env.k)}

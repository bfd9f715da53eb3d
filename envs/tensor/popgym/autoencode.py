"""POPGym's Autoencode as a tensor env: watch a deck's suits, then play them back in reverse.

POPGym's ``Autoencode(num_decks)`` deals a shuffled deck of ``C = 52 * num_decks`` cards into a
hand, one per step (*watch*), observing ``(1, suit)`` of each; the step that deals the last
card observes ``(0, suit)``: the play phase begins. Then each step takes the hand's last card
back, scoring the action against its suit, and observes ``(0, 0)``. A reference loop of one
episode (``deck.py`` for the deck)::

    hand = [deal()]                                   # reset: observe (1, suit(hand[-1]))
    while cards_left > 0:                             # step: watch
        hand.append(deal())                           # reward 0
        observe (1 if cards_left > 0 else 0, suit(hand[-1]))
    while True:                                       # step(action): play
        terminated = len(hand) == 1
        reward = +1 / C if action == suit(hand.pop()) else -1 / C
        observe (0, 0)

so an episode is ``2C - 1`` steps. Easy: one deck; Medium: two; Hard: three.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.deck import SUITS, DeckEnv, card_at, suit
from rlmem.envs.tensor.popgym.popgym_env import scored

WATCH, PLAY = 1, 0
"""POPGym's ``Mode``: the first field of the observation."""


class Autoencode(DeckEnv):
    """POPGym's ``Autoencode(num_decks)`` for ``num_envs`` envs (module docstring).

    Its observation is a pair, as POPGym's ``Tuple(Discrete(2), Discrete(4))``: a tuple of the
    mode and the suit, each ``(N,)`` int64.

    State: ``order`` ``(N, C)`` (each deck's order), ``remaining`` ``(N,)`` (cards left in the
    deck) and ``held`` ``(N,)`` (cards in the hand, whose last is ``order[C - held]``). The
    mode follows from them: the deck is empty in the play phase.
    """

    def __init__(self, num_envs: int, num_decks: int = 1,
                 device: torch.device | str = "cpu") -> None:
        observation = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(SUITS)))
        super().__init__(num_envs, num_decks, observation, spaces.Discrete(SUITS), device)
        self.held = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.scale = 1 / self.cards

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        super()._generate(envs, draws)
        self.held = torch.where(envs, 1, self.held)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        watching = self.remaining > 0
        last = suit(card_at(self.order, self.cards - self.held))
        reward = scored(actions == last, self.scale)
        reward = torch.where(watching, 0.0, reward)
        terminated = ~watching & (self.held == 1)
        step = torch.where(watching, 1, -1)
        self.remaining = self.remaining - watching.to(torch.int64)
        self.held = self.held + step
        return reward, terminated, torch.zeros_like(terminated)

    def _observe(self) -> tuple[Tensor, Tensor]:
        watching = self.remaining > 0
        # The card just dealt is shown while watching, and at the step that dealt the last
        # one (the hand is then the whole deck); in the play phase, suit 0.
        shown = watching | (self.held == self.cards)
        card = suit(card_at(self.order, self.cards - self.held))
        return (torch.where(watching, WATCH, PLAY), torch.where(shown, card, 0))

    def _load(self, row: int, env: Any) -> None:
        remaining = int(env.deck.deck_len)
        if int(env.mode) != (WATCH if remaining > 0 else PLAY):
            raise ValueError(f"Autoencode: POPGym's env is in mode {int(env.mode)} with "
                             f"{remaining} cards left in its deck, which it never is")
        super()._load(row, env)
        self.held[row] = len(env.deck["system"])

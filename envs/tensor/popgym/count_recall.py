"""POPGym's CountRecall as a tensor env: how often was the queried kind of card dealt?

POPGym's ``CountRecall(num_decks, deck_type)`` deals two shuffled decks of ``C = 52 *
num_decks`` cards side by side, one card of each per step: a *value* card, counted, and a
*query* card. Cards are told apart by their ``deck_type``: colour (2 kinds), suit (4) or rank
(13). It observes ``[kind(value), kind(query)]``; the action answers how many value cards of
the queried kind had been dealt when the query was shown. A reference loop of one episode
(``deck.py`` for the decks)::

    value, query = deal(value_deck), deal(query_deck)         # reset
    counts = zeros(kinds); counts[kind(value)] += 1           # observe [kind(value), kind(query)]
    while True:                                               # step(action)
        answer = counts[kind(query)]
        value, query = deal(value_deck), deal(query_deck)
        counts[kind(value)] += 1
        reward = +1 / (C - 1) if action == answer else -1 / (C - 1)
        terminated = cards_left == 0

so an episode is ``C - 1`` steps; the action space is ``Discrete(C / kinds + 1)``. Easy: one
deck, colours; Medium: two, suits; Hard: four, ranks.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.envs.tensor.popgym.deck import (
    CARDS_PER_DECK,
    COLOURS,
    RANKS,
    SUITS,
    card_at,
    colour,
    copy_deck,
    rank,
    shuffled,
    suit,
)
from rlmem.envs.tensor.popgym.popgym_env import PopgymTensorEnv, scored

KINDS = {"colors": (colour, COLOURS), "suits": (suit, SUITS), "ranks": (rank, RANKS)}
"""POPGym's ``deck_type``: what tells cards apart, and how many kinds there are."""


class CountRecall(PopgymTensorEnv):
    """POPGym's ``CountRecall(num_decks, deck_type)`` for ``num_envs`` envs (module
    docstring).

    State: ``values`` and ``queries`` ``(N, C)`` (the two decks' orders), ``remaining``
    ``(N,)`` (cards left in each; the cards dealt last are at ``remaining``) and ``counts``
    ``(N, kinds)`` (value cards dealt of each kind).
    """

    def __init__(self, num_envs: int, num_decks: int = 1, deck_type: str = "colors",
                 device: torch.device | str = "cpu") -> None:
        if deck_type not in KINDS:
            raise ValueError(f"CountRecall: deck_type={deck_type!r}; use one of "
                             f"{', '.join(KINDS)}")
        self.num_decks, self.deck_type = num_decks, deck_type
        self.cards = CARDS_PER_DECK * num_decks
        self.kind, kinds = KINDS[deck_type]
        super().__init__(num_envs, spaces.MultiDiscrete([kinds, kinds]),
                         spaces.Discrete(self.cards // kinds + 1),
                         draws_per_episode=2 * self.cards, device=device)
        self.values = torch.zeros(num_envs, self.cards, dtype=torch.int64, device=self.device)
        self.queries = torch.zeros_like(self.values)
        self.remaining = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self.counts = torch.zeros(num_envs, kinds, dtype=torch.int64, device=self.device)
        self.scale = 1 / (self.cards - 1)

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        fresh = envs.unsqueeze(1)
        self.values = torch.where(fresh, shuffled(draws[:, :self.cards]), self.values)
        self.queries = torch.where(fresh, shuffled(draws[:, self.cards:]), self.queries)
        self.remaining = torch.where(envs, self.cards - 1, self.remaining)
        first = self.kind(card_at(self.values, self.remaining))
        counts = torch.nn.functional.one_hot(first, self.counts.shape[1])
        self.counts = torch.where(fresh, counts, self.counts)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        query = self.kind(card_at(self.queries, self.remaining))
        answer = self.counts.gather(1, query.unsqueeze(1)).squeeze(1)
        self.remaining = self.remaining - 1
        value = self.kind(card_at(self.values, self.remaining))
        self.counts = self.counts.scatter_add(1, value.unsqueeze(1),
                                              torch.ones_like(value).unsqueeze(1))
        reward = scored(actions == answer, self.scale)
        terminated = self.remaining == 0
        return reward, terminated, torch.zeros_like(terminated)

    def _observe(self) -> Tensor:
        return torch.stack([self.kind(card_at(self.values, self.remaining)),
                            self.kind(card_at(self.queries, self.remaining))], dim=1)

    @classmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        cls._check_original(env)
        kinds = {name for name, (_, count) in KINDS.items() if count == env.num_distinct_cards}
        return {"num_decks": int(env.value_deck.num_decks), "deck_type": kinds.pop()}

    def _load(self, row: int, env: Any) -> None:
        values, remaining = copy_deck(env.value_deck)
        queries, query_remaining = copy_deck(env.query_deck)
        if remaining != query_remaining:
            raise ValueError("CountRecall: POPGym's two decks hold different numbers of cards")
        self.values[row], self.queries[row] = values.to(self.device), queries.to(self.device)
        self.remaining[row] = remaining
        self.counts[row] = torch.as_tensor(env.counts, dtype=torch.int64)

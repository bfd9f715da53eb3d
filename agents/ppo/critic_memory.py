"""The memory state of an actor and a critic that each have their own cell, as one flat state.

With ``agent.shared_memory=false`` (:class:`~rlmem.agents.ppo.model.ActorCritic`), the critic
has a second cell of the actor's config, as sb3-contrib's ``enable_critic_lstm`` gives its
critic an LSTM of its own. Everything that carries the memory between steps (the collector,
the rollout's chunk start states, :func:`~rlmem.agents.ppo.rollout.stack_states`,
:func:`~rlmem.agents.ppo.rollout.select_state`, evaluation) handles a state as one NamedTuple of
tensors with the batch on dim 0, field by field. So the pair is one NamedTuple too: the actor
cell's fields (prefixed ``actor_``) followed by the critic cell's (``critic_``), and the state
travels wherever the actor's did with no change to those carriers.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any

from rlmem.cells import State


@functools.cache
def paired_state_type(actor: type[State], critic: type[State]) -> type[State]:
    """The NamedTuple holding an ``actor`` state's fields, then a ``critic`` state's: one type
    per pair of cell state types (so states of one model are of one type)."""
    fields = [f"actor_{name}" for name in actor._fields] + [
        f"critic_{name}" for name in critic._fields]
    paired: type[State] = namedtuple(  # type: ignore[misc]  # a NamedTuple type made at run time
        f"{actor.__name__}{critic.__name__}Pair", fields)
    return paired


def pair_states(actor: State, critic: State) -> State:
    """``actor``'s and ``critic``'s fields as one state (:func:`paired_state_type`)."""
    return paired_state_type(type(actor), type(critic))._make((*actor, *critic))


def split_state(state: Any, actor: type[State], critic: type[State]) -> tuple[State, State]:
    """The actor's and the critic's states in a paired ``state``: the inverse of
    :func:`pair_states`.

    Raises:
        ValueError: ``state`` is not a pair of these cells' states (e.g. a shared memory's).
    """
    size = len(actor._fields)
    if len(state) != size + len(critic._fields):
        raise ValueError(f"a state of {len(state)} fields is not a pair of {actor.__name__} "
                         f"and {critic.__name__} states: the model has a separate critic "
                         "memory (agent.shared_memory=false) and needs both")
    return actor._make(state[:size]), critic._make(state[size:])

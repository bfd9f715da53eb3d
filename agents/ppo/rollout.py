"""A rollout of our PPO and its sequence layout: BPTT chunks, in minibatches of whole chunks.

The rollout records its chunk length (``recurrence``) and the memory state at the start of
every chunk, so it alone decides how it is cut: :meth:`Rollout.chunks` lays it out as chunks
and :meth:`ChunkBatch.minibatches` deals them out, as sb3-contrib's recurrent buffer ``get``
does for RecurrentPPO.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import torch
from torch import Tensor

if TYPE_CHECKING:
    from rlmem.cells import State

S = TypeVar("S", bound="State")
"""A memory state: a cell's NamedTuple of tensors."""


def stack_states(states: list[S]) -> S:
    """Stack a list of memory states (NamedTuples) field by field on a new leading dim."""
    return states[0]._make(torch.stack(fields) for fields in zip(*states, strict=True))


def cat_states(states: list[S]) -> S:
    """Concatenate a list of memory states (NamedTuples) field by field on the batch dim."""
    return states[0]._make(torch.cat(fields) for fields in zip(*states, strict=True))


def select_state(state: S, index: Tensor) -> S:
    """The batch items ``index`` of every field of a memory state (fields may be of any dtype)."""
    return state._make(value.index_select(0, index) for value in state)


def _chunks(value: Tensor, recurrence: int) -> Tensor:
    """``(T, B, ...)`` -> ``(recurrence, T / recurrence * B, ...)``: time within a chunk first,
    then chunk ``k`` of env ``b`` at column ``k * B + b`` (the layout of ``chunk_states``
    flattened)."""
    steps, batch = value.shape[:2]
    chunked = value.reshape(steps // recurrence, recurrence, batch, *value.shape[2:])
    return chunked.transpose(0, 1).reshape(recurrence, -1, *value.shape[2:])


@dataclass(frozen=True)
class ChunkBatch:
    """Whole chunks of ``L`` consecutive steps of one env each, as the columns of time-major
    tensors: column ``n`` is replayed from ``start_state[n]``, and ``resets`` re-initialise the
    memory inside it.

    Shapes:
        - observations[key]: ``(L, N, *field shape)``
        - resets, old_log_probs, old_values, advantages, returns: ``(L, N)``
        - actions: ``(L, N, *head.action_shape)``
        - start_state: each field ``(N, ...)``
    """

    observations: dict[str, Tensor]
    resets: Tensor
    start_state: State
    """The memory state before each chunk's first step, as it was in the rollout."""
    actions: Tensor
    old_log_probs: Tensor
    """Log-probabilities of the actions under the rollout policy."""
    old_values: Tensor
    """Values under the rollout policy."""
    advantages: Tensor
    returns: Tensor

    @property
    def num_chunks(self) -> int:
        """``N``."""
        return self.resets.shape[1]

    def select(self, index: Tensor) -> ChunkBatch:
        """The chunks ``index``."""
        # index_select, not value[:, index]: the same copy, which advanced indexing makes
        # through a general gather, ~15x slower on a minibatch of MiniGrid views
        def columns(value: Tensor) -> Tensor:
            return value.index_select(1, index)

        return ChunkBatch({key: columns(value) for key, value in self.observations.items()},
                          columns(self.resets), select_state(self.start_state, index),
                          columns(self.actions), columns(self.old_log_probs),
                          columns(self.old_values), columns(self.advantages),
                          columns(self.returns))

    def minibatches(self, batch_size: int) -> Iterator[ChunkBatch]:
        """One pass over the chunks in a random order (``torch.randperm``), ``batch_size``
        frames of whole chunks per minibatch (:func:`chunks_per_minibatch`; the last may be
        smaller)."""
        order = torch.randperm(self.num_chunks, device=self.resets.device)
        for index in order.split(chunks_per_minibatch(batch_size, self.resets.shape[0])):
            yield self.select(index)


def chunks_per_minibatch(batch_size: int, chunk_length: int) -> int:
    """The whole chunks of ``chunk_length`` steps in a minibatch of ``batch_size`` frames (at
    least one)."""
    return max(1, batch_size // chunk_length)


@dataclass
class Rollout:
    """``T`` steps of ``B`` envs, time-major, on the training device.

    ``resets[t, b]`` marks ``observations[t, b]`` as the first observation of an episode, so the
    memory of ``b`` (and only of ``b``) is re-initialised before it. ``chunk_states[k]`` is the
    memory state before step ``k * recurrence``, as it was during the rollout (no gradient).
    """

    observations: dict[str, Tensor]
    """Each field ``(T, B, ...)``."""
    resets: Tensor
    """``(T, B)`` bool."""
    actions: Tensor
    """``(T, B, *head.action_shape)``, as the head stores them (long indices, or a Gaussian's
    unclipped sample)."""
    log_probs: Tensor
    """Log-probability of the action under the rollout policy, ``(T, B)``."""
    values: Tensor
    """``V(o_t)`` under the rollout policy, ``(T, B)``."""
    rewards: Tensor
    """``(T, B)``."""
    terminated: Tensor
    """``(T, B)`` bool: the episode ended at ``t``."""
    truncated: Tensor
    """``(T, B)`` bool: the episode was cut by a time limit at ``t``."""
    final_values: Tensor
    """``V`` of the last observation of an episode truncated at ``t`` (else 0), ``(T, B)``."""
    last_values: Tensor
    """``V`` of the observation after step ``T - 1``, ``(B,)``."""
    recurrence: int
    """The BPTT chunk length ``L``; ``T`` is a multiple of it."""
    chunk_states: State | None
    """Memory state before every ``recurrence``-th step; each field ``(T / recurrence, B, ...)``
    (None while the rollout is being collected)."""
    episode_returns: list[float] = field(default_factory=list)
    """Returns of the episodes that ended during the rollout."""
    episode_lengths: list[int] = field(default_factory=list)
    """Lengths of the episodes that ended during the rollout."""

    def chunks(self, advantages: Tensor, returns: Tensor) -> ChunkBatch:
        """The rollout as chunks of ``recurrence`` steps, with its ``advantages`` and
        ``returns`` (``(T, B)`` each): chunk ``k`` of env ``b`` is column ``k * B + b``."""
        length, chunk_states = self.recurrence, self.chunk_states
        if chunk_states is None:
            raise ValueError("the rollout has no chunk states yet: it is still being collected")
        return ChunkBatch(
            observations={key: _chunks(value, length) for key, value in self.observations.items()},
            resets=_chunks(self.resets, length),
            start_state=chunk_states._make(value.flatten(0, 1) for value in chunk_states),
            actions=_chunks(self.actions, length),
            old_log_probs=_chunks(self.log_probs, length),
            old_values=_chunks(self.values, length),
            advantages=_chunks(advantages, length),
            returns=_chunks(returns, length))

"""Packing a cell's whole state into the ``(h, c)`` float32 pair that RecurrentPPO stores.

sb3-contrib's :class:`~sb3_contrib.ppo_recurrent.RecurrentPPO` keeps two float32 arrays per
step and per actor/critic, each of shape ``(num_layers, n_envs, hidden)``: it copies them into
its rollout buffer, slices them per sequence, and hands them back to the policy. It never does
arithmetic on them (the reset masking is the policy's job, and :class:`MemoryPolicy` does it
through the cell contract). So any state fits, if it is laid out as float32 words:

- every field is flattened per environment and the fields are concatenated in NamedTuple order,
  one vector of :attr:`StatePacker.words` float32 words per environment;
- the vector is zero-padded to ``2 * hidden_size`` and split in half: ``h`` and ``c``;
- ``num_layers`` is 1.

Each field is encoded by its dtype (:data:`CODECS`):

- float32 is stored as is;
- 4- and 8-byte dtypes (int32, int64, float64) are *bit-cast*: their bytes are reinterpreted as
  one or two float32 words. This is exact for every value, including integers beyond float32's
  2**24 and bit patterns that read as NaN or subnormal floats; the only requirement is that
  the words are copied, never computed on, which holds for RecurrentPPO's buffer and
  ``predict``;
- bool, small ints and half floats are *converted* to float32, which represents each of their
  values exactly.

The all-zeros state packs to all-zeros words (the bit pattern of integer 0 is float 0.0), so
RecurrentPPO's zero-initialised states and ``predict(state=None)`` unpack to
:meth:`~rlmem.cells.Cell.initial_state`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    from rlmem.cells import Cell, State

STORAGE_DTYPE = torch.float32
"""The dtype of RecurrentPPO's hidden-state arrays."""

_BITCAST_DTYPES = (torch.float32, torch.int32, torch.float64, torch.int64)
_CONVERT_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.float16,
                   torch.bfloat16)


@dataclass(frozen=True)
class Codec:
    """How one dtype becomes float32 words and back, exactly.

    Attributes:
        words_per_item: float32 words per element of the field.
        encode: ``(B, n) field values -> (B, n * words_per_item) float32``.
        decode: ``((B, n * words_per_item) float32, dtype) -> (B, n) field values``.
    """

    words_per_item: int
    encode: Callable[[Tensor], Tensor]
    decode: Callable[[Tensor, torch.dtype], Tensor]


def _bitcast_codec(dtype: torch.dtype) -> Codec:
    words = dtype.itemsize // STORAGE_DTYPE.itemsize
    return Codec(words,
                 encode=lambda value: value.contiguous().view(STORAGE_DTYPE),
                 decode=lambda packed, target: packed.contiguous().view(target))


def _convert_codec() -> Codec:
    return Codec(1, encode=lambda value: value.to(STORAGE_DTYPE),
                 decode=lambda packed, target: packed.to(target))


CODECS: dict[torch.dtype, Codec] = {
    **{dtype: _bitcast_codec(dtype) for dtype in _BITCAST_DTYPES},
    **{dtype: _convert_codec() for dtype in _CONVERT_DTYPES},
}
"""The state dtypes that can be packed, and how."""


@dataclass(frozen=True)
class _Field:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    start: int
    stop: int
    codec: Codec


class StatePacker:
    """Packs a cell's NamedTuple state into RecurrentPPO's ``(h, c)`` and unpacks it exactly.

    Args:
        state_type: the cell's NamedTuple state class (``cell.state_type``).
        state_shapes: ``cell.state_shapes()``: per field of ``state_type``, in its order (both
            come from the state's one declaration, :class:`~rlmem.cells.Dims`), the shape
            without the batch dim and the dtype (``None``: ``float_dtype``).
        float_dtype: the dtype of the fields whose dtype is ``None`` (the policy's dtype).

    Raises:
        TypeError: a field has a dtype without an exact float32 encoding (:data:`CODECS`).

    Shapes:
        - state: each field ``(B, *shape)``
        - h, c: ``(1, B, hidden_size)`` float32
    """

    num_layers = 1
    """RecurrentPPO's ``num_layers``: the whole state is one "layer"."""

    def __init__(self, state_type: type[State], state_shapes: Mapping[str, tuple[tuple[int, ...],
                                                                        torch.dtype | None]],
                 float_dtype: torch.dtype = torch.float32) -> None:
        self.state_type = state_type
        fields: list[_Field] = []
        start = 0
        for name, (shape, dtype) in state_shapes.items():
            dtype = dtype if dtype is not None else float_dtype
            if dtype not in CODECS:
                raise TypeError(
                    f"state field {name!r} has dtype {dtype}, which has no exact float32 "
                    f"encoding for RecurrentPPO's buffer; supported: "
                    f"{', '.join(str(d) for d in CODECS)}")
            codec = CODECS[dtype]
            stop = start + math.prod(shape) * codec.words_per_item
            fields.append(_Field(name, tuple(shape), dtype, start, stop, codec))
            start = stop
        self._fields = fields
        self.words = start
        """float32 words that one environment's state occupies."""
        self.hidden_size = max(1, math.ceil(self.words / 2))
        """Width of each of ``h`` and ``c``: half the words, rounded up."""

    @classmethod
    def for_cell(cls, cell: Cell, float_dtype: torch.dtype = torch.float32) -> StatePacker:
        """The packer of ``cell`` (a :class:`~rlmem.cells.Cell`)."""
        return cls(cell.state_type, cell.state_shapes(), float_dtype)

    def pack(self, state: State) -> tuple[Tensor, Tensor]:
        """``state -> (h, c)``, each ``(1, B, hidden_size)`` float32."""
        batch = state[0].shape[0]
        parts = []
        for field, value in zip(self._fields, state, strict=True):
            if value.dtype != field.dtype:
                raise TypeError(f"state.{field.name} has dtype {value.dtype}, expected "
                                f"{field.dtype}")
            parts.append(field.codec.encode(value.reshape(batch, -1)))
        padding = 2 * self.hidden_size - self.words
        if padding:
            parts.append(torch.zeros(batch, padding, dtype=STORAGE_DTYPE, device=state[0].device))
        flat = torch.cat(parts, dim=1)
        return (flat[:, :self.hidden_size].unsqueeze(0),
                flat[:, self.hidden_size:].unsqueeze(0))

    def unpack(self, packed: tuple[Tensor, Tensor]) -> State:
        """``(h, c) -> state``, the exact inverse of :meth:`pack`."""
        h, c = packed
        expected = (self.num_layers, self.hidden_size)
        if h.dim() != 3 or (h.shape[0], h.shape[2]) != expected or h.shape != c.shape:
            raise ValueError(f"packed state must be two (1, n_envs, {self.hidden_size}) tensors, "
                             f"got {tuple(h.shape)} and {tuple(c.shape)}")
        if h.dtype != STORAGE_DTYPE or c.dtype != STORAGE_DTYPE:
            # A float64 copy would round the bit-cast words.
            raise TypeError(f"packed state must be float32, got {h.dtype} and {c.dtype}")
        flat = torch.cat((h[0], c[0]), dim=1)
        batch = flat.shape[0]
        return self.state_type._make(
            field.codec.decode(flat[:, field.start:field.stop], field.dtype)
            .reshape(batch, *field.shape)
            for field in self._fields)

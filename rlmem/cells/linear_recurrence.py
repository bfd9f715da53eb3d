r"""The cells whose complex state is an elementwise affine map of the previous one: FFM, LRU.

Their state follows :math:`s_t = a_t \odot s_{t-1} + b_t`, with :math:`(a_t, b_t)` worked out
from the input alone, and their output reads :math:`s_t` and the input. So a chunk needs no
time loop: the maps of all steps are computed at once (:meth:`LinearRecurrence.transition`),
composed by an associative scan (:mod:`rlmem.cells._engines.associative_scan`), and read out at
once (:meth:`LinearRecurrence.readout`). Each cell's :meth:`~rlmem.cells.base.Cell.step`,
written in its paper's form, stays the specification that the scan is proven equal to
(``tests/cells/test_modern_cells.py``, ``tests/cells/test_engines.py``).
"""

from __future__ import annotations

import abc
from typing import Any

import torch
from torch import Tensor

from rlmem.cells._engines.associative_scan import Affine, diagonal_scan
from rlmem.cells.base import Cell, ScanResult


class LinearRecurrence(Cell, abc.ABC):
    """A :class:`~rlmem.cells.base.Cell` with an affine state update, run by an associative scan.

    A subclass gives :meth:`parts`, :meth:`split`, :meth:`transition`, :meth:`readout` and its
    ``step``; its state is complex, held as two real fields (:meth:`pack`). A chunk computes
    its parts once and hands the same tensors to :meth:`transition` and :meth:`readout`: the
    step's features, one tensor of them all (:meth:`project_input`), cost a copy forward and
    a zero-filled copy backward for each reader, which the chunk does without.
    """

    @abc.abstractmethod
    def parts(self, x: Tensor) -> tuple[Tensor, ...]:
        """What :meth:`transition` and :meth:`readout` read of every step's input.

        Shapes:
            - x: ``(*, input_size)``; returns tensors of shapes ``(*, F_i)``
        """

    @abc.abstractmethod
    def split(self, features: Tensor) -> tuple[Tensor, ...]:
        """:meth:`parts` from :meth:`project_input`'s features (their inverse)."""

    def project_input(self, x: Tensor) -> Tensor:
        """:meth:`parts` as one tensor, for the reference loop's :meth:`step`.

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, sum F_i)``
        """
        return torch.cat(self.parts(x), -1)

    @abc.abstractmethod
    def transition(self, parts: tuple[Tensor, ...]) -> Affine:
        """The map :math:`(a_t, b_t)` of every step from its :meth:`parts`.

        Shapes:
            - parts: each ``(*, F_i)``; returns :math:`a` broadcastable to :math:`b`, and
              :math:`b` of the state's shape with ``*`` leading
        """

    @abc.abstractmethod
    def readout(self, parts: tuple[Tensor, ...], s: Tensor) -> Tensor:
        """The output of every step from its :meth:`parts` and its new state :math:`s_t`.

        Shapes:
            - parts: each ``(*, F_i)``; s: ``(*, state)``; returns ``(*, output_size)``
        """

    def pack(self, s: Tensor) -> Any:
        """The cell's :attr:`state_type` holding the complex state ``s`` (``(B, *)``) as its
        two fields, the real part then the imaginary part."""
        return self.state_type._make((s.real, s.imag))

    def unpack(self, state: Any) -> Tensor:
        """The complex state held in ``state`` (the inverse of :meth:`pack`)."""
        real, imaginary = state
        return torch.complex(real, imaginary)

    def fast_scan(self, x: Tensor, state: Any, resets: Tensor) -> ScanResult:
        """The chunk through the associative scan
        (:func:`~rlmem.cells._engines.associative_scan.diagonal_scan`)."""
        parts = self.parts(x)
        a, b = self.transition(parts)
        states = diagonal_scan(a, b, self.unpack(state), resets)
        return ScanResult(self.readout(parts, states), self.pack(states[-1]), {})

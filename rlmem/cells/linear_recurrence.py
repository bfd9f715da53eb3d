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

    A subclass gives :meth:`transition`, :meth:`readout` and its ``step``; its state is
    complex, held as two real fields (:meth:`pack`).
    """

    @abc.abstractmethod
    def transition(self, features: Tensor) -> Affine:
        """The map :math:`(a_t, b_t)` of every step from :meth:`project_input`'s features.

        Shapes:
            - features: ``(*, F)``; returns :math:`a` broadcastable to :math:`b`, and
              :math:`b` of the state's shape with ``*`` leading
        """

    @abc.abstractmethod
    def readout(self, features: Tensor, s: Tensor) -> Tensor:
        """The output of every step from its features and its new state :math:`s_t`.

        Shapes:
            - features: ``(*, F)``; s: ``(*, state)``; returns ``(*, output_size)``
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
        features = self.project_input(x)
        a, b = self.transition(features)
        states = diagonal_scan(a, b, self.unpack(state), resets)
        return ScanResult(self.readout(features, states), self.pack(states[-1]), {})

"""The sequence model of the supervised tasks: input encoding, a memory cell, a linear readout."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from rlmem.cells import Cell, CellOutput


class SequenceModel(nn.Module):
    """``y_t = W_o · cell(encode(x))_t + b_o`` at every step.

    Symbols are one-hot encoded (as in Arjovsky et al., 2016), so the cell's input weights play
    the role of an embedding; feature inputs (adding) go to the cell unchanged.

    Args:
        cell: the memory cell; its ``input_size`` must match the task's encoded input.
        output_size: classes per step (or 1 for regression).
        categorical: inputs are ``(L, B)`` long symbols to one-hot encode.
    """

    def __init__(self, cell: Cell, output_size: int, categorical: bool) -> None:
        super().__init__()
        self.cell = cell
        self.categorical = categorical
        self.readout = nn.Linear(cell.output_size, output_size)

    def encode(self, inputs: Tensor) -> Tensor:
        """Shapes: ``(L, B)`` long symbols or ``(L, B, F)`` features -> ``(L, B, input_size)``."""
        if self.categorical:
            return F.one_hot(inputs, self.cell.input_size).to(self.readout.weight.dtype)
        return inputs.to(self.readout.weight.dtype)

    def forward(self, inputs: Tensor, state: object | None = None) -> tuple[Tensor, CellOutput]:
        """Run the whole sequence from ``state`` (``None``: the cell's zero state).

        Shapes:
            - inputs: ``(L, B)`` long or ``(L, B, F)`` float
            - returns outputs ``(L, B, output_size)`` and the cell's :class:`CellOutput`
              (final state, aux losses, diagnostics, traces).
        """
        result = self.cell.forward_aux(self.encode(inputs), state)
        return self.readout(result.output), result

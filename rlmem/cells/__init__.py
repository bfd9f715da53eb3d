"""Recurrent memory cells behind one contract (see :mod:`rlmem.cells.base`).

>>> from rlmem.cells import make_cell
>>> cell = make_cell("relstm", input_size=8, hidden_size=16, short_term=5, relevant=5)
>>> y, state = cell(torch.zeros(10, 4, 8))  # doctest: +SKIP
>>> stack = make_cell("lstm", input_size=8, hidden_size=16, num_layers=2, dropout=0.1)
"""

# Importing a cell module registers its cells.
from rlmem.cells import ernn, gru, irnn, lstm, memlstm, relrnn, relstm, sarnn, tarnn  # noqa: F401
from rlmem.cells.base import Aux, Cell, CellOutput, State, reset_state, scan
from rlmem.cells.registry import (
    CELLS,
    cell_config,
    get_cell_class,
    hyperparameters,
    make_cell,
    make_cell_from_config,
    register,
)
from rlmem.cells.stacked import Stacked

__all__ = [
    "CELLS",
    "Aux",
    "Cell",
    "CellOutput",
    "Stacked",
    "State",
    "cell_config",
    "get_cell_class",
    "hyperparameters",
    "make_cell",
    "make_cell_from_config",
    "register",
    "reset_state",
    "scan",
]

"""Recurrent memory cells behind one contract (see :mod:`rlmem.cells.base`).

>>> from rlmem.cells import make_cell
>>> cell = make_cell("relstm", input_size=8, hidden_size=16, short_term=5, relevant=5)
>>> y, state = cell(torch.zeros(10, 4, 8))  # doctest: +SKIP
>>> stack = make_cell("lstm", input_size=8, hidden_size=16, num_layers=2, dropout=0.1)

Importing this package registers every cell: each public module of the package is imported,
then the cells of installed plugins (the entry-point group ``rlmem.cells``); see
:mod:`rlmem.cells.registry`. A new cell is one file, listed nowhere else.
"""

import sys

from rlmem.cells._engines.fused_rnn import compiled_lstm
from rlmem.cells._engines.onednn_linear import onednn_products
from rlmem.cells.base import Aux, Cell, CellOutput, Dims
from rlmem.cells.registry import (
    CELLS,
    ENTRY_POINT_GROUP,
    CellPluginError,
    cell_config,
    full_attention,
    get_cell_class,
    hyperparameters,
    load_package_cells,
    load_plugins,
    make_cell,
    make_cell_from_config,
    register,
    widened_note,
)
from rlmem.cells.stacked import Stacked
from rlmem.cells.time_loop import State, reset_state, scan

__all__ = [
    "CELLS",
    "ENTRY_POINT_GROUP",
    "Aux",
    "Cell",
    "CellOutput",
    "CellPluginError",
    "Dims",
    "Stacked",
    "State",
    "cell_config",
    "compiled_lstm",
    "full_attention",
    "get_cell_class",
    "hyperparameters",
    "make_cell",
    "make_cell_from_config",
    "onednn_products",
    "register",
    "reset_state",
    "scan",
    "widened_note",
]

# Last, so that a plugin can import what it needs from this package while it loads.
load_package_cells(sys.modules[__name__])
load_plugins()

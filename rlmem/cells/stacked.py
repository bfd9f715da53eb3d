"""Stacked cells: layers of cells behind the one cell contract, like ``nn.LSTM(num_layers=n)``.

>>> cell = make_cell("relstm", input_size=8, hidden_size=16, num_layers=2, dropout=0.1)
>>> type(cell).__name__, cell.state_type._fields[:2]  # doctest: +SKIP
('Stacked', ('l0_h', 'l0_c'))

:func:`~rlmem.cells.make_cell` builds a :class:`Stacked` when ``num_layers > 1`` and the plain
cell otherwise, so one-layer models and their checkpoints are unchanged.
"""

from __future__ import annotations

import itertools
import typing
import warnings
from collections import namedtuple
from collections.abc import Mapping, Sequence
from typing import ClassVar

import torch
from torch import Tensor, nn

from rlmem.cells.base import Cell
from rlmem.cells.time_loop import ScanResult, State


def check_stack(num_layers: int, dropout: float) -> None:
    """Validate the stacking arguments shared by :class:`Stacked` and ``make_cell``.

    Raises:
        ValueError: ``num_layers`` is not an int ≥ 1, or ``dropout`` is not in ``[0, 1)``.

    Warns:
        UserWarning: ``dropout > 0`` with one layer, where it has no effect (as ``nn.LSTM``).
    """
    if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers < 1:
        raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}")
    if (not isinstance(dropout, (int, float)) or isinstance(dropout, bool)
            or not 0.0 <= dropout < 1.0):
        raise ValueError(f"dropout must be a float in [0, 1), got {dropout!r}")
    if dropout and num_layers == 1:
        warnings.warn(f"dropout={dropout} has no effect with num_layers=1: it applies between "
                      f"stacked layers, not after the last one (as in torch.nn.LSTM)",
                      UserWarning, stacklevel=3)


_STATE_TYPES: dict[tuple[type[State], ...], type[State]] = {}


def stacked_state_type(layer_types: tuple[type[State], ...]) -> type[State]:
    """The NamedTuple of a stack whose layers have the NamedTuple states ``layer_types``.

    Its fields are the layers' fields prefixed by the layer index (``l0_h, l0_c, l1_h, ...``),
    so the state stays one flat NamedTuple of batch-first tensors, which the reset, the
    validation and the sb3 packing all rely on. Built once per tuple of layer types, so that
    equal stacks share one state class.
    """
    if layer_types not in _STATE_TYPES:
        fields = [f"l{index}_{key}" for index, state_type in enumerate(layer_types)
                  for key in state_type._fields]
        names = dict.fromkeys(state_type.__name__ for state_type in layer_types)
        name = f"Stacked{len(layer_types)}{''.join(names)}"
        # Fields known at run time only: the checker cannot see this class's fields.
        _STATE_TYPES[layer_types] = typing.cast(type[State],
                                                namedtuple(name, fields, module=__name__))
    return _STATE_TYPES[layer_types]


class Stacked(Cell):
    r"""A stack of cells: layer :math:`l` reads the output of layer :math:`l-1`.

    .. math::
        y^{(1)}_t, s^{(0)}_t &= \mathrm{cell}_0\big(x_t, s^{(0)}_{t-1}\big) \\
        y^{(l+1)}_t, s^{(l)}_t &= \mathrm{cell}_l\big(D(y^{(l)}_t), s^{(l)}_{t-1}\big)
        \qquad l = 1, \dots, L-1

    where :math:`D` is dropout with probability ``dropout``, in training mode only: between
    layers, never on the input or after the last layer (as in :class:`torch.nn.LSTM`). The
    output is :math:`y^{(L)}_t` and the state is :math:`(s^{(0)}_t, \dots, s^{(L-1)}_t)`. A
    reset re-initialises every layer.

    The reference loop is :func:`~rlmem.cells.time_loop.scan` over :meth:`step`, which runs all
    layers for one step. :meth:`fast_scan` runs the same layers layer after layer over the
    whole chunk instead, so that each layer runs its own engine; without dropout the two give
    the same result. Auxiliary losses, diagnostics and traces are each layer's, under the prefix
    ``l<index>_`` when there is more than one layer. :meth:`anneal` reaches every layer.

    Args:
        layers: the cells, bottom first; each ``input_size`` must be the previous
            ``output_size``.
        dropout: probability of zeroing a feature between two layers, in ``[0, 1)``.

    Attributes:
        state_type: a NamedTuple with every layer's fields, prefixed ``l<index>_``
            (:func:`stacked_state_type`).

    Shapes:
        - x: ``(T, B, layers[0].input_size)``; resets: ``(T, B)``
        - output: ``(T, B, layers[-1].output_size)``
        - state: each field of layer ``l`` as that layer's, under ``l<l>_<field>``
    """

    name: ClassVar[str] = "stacked"

    def __init__(self, layers: Sequence[Cell], *, dropout: float = 0.0) -> None:
        layers = list(layers)
        if not layers or not all(isinstance(layer, Cell) for layer in layers):
            raise ValueError(f"Stacked needs a non-empty sequence of cells, got {layers!r}")
        check_stack(len(layers), dropout)
        for index in range(1, len(layers)):
            below, above = layers[index - 1], layers[index]
            if above.input_size != below.output_size:
                raise ValueError(f"Stacked: layer {index} has input_size {above.input_size} "
                                 f"but layer {index - 1} outputs {below.output_size}")
        super().__init__(layers[0].input_size, layers[-1].hidden_size)
        self.layers = nn.ModuleList(layers)
        self.dropout = float(dropout)
        # Per instance, not per class: the fields depend on the layers.
        self.state_type = stacked_state_type(tuple(layer.state_type for layer in layers))
        self._prefixes = ([f"l{index}_" for index in range(len(layers))] if len(layers) > 1
                          else [""])
        self._field_counts = [len(layer.state_type._fields) for layer in layers]

    @property
    def cells(self) -> list[Cell]:
        """The layers, bottom first."""
        return typing.cast(list[Cell], list(self.layers))  # only cells enter (__init__)

    @property
    def num_layers(self) -> int:
        """Number of stacked cells."""
        return len(self.layers)

    @property
    def output_size(self) -> int:
        return self.cells[-1].output_size

    # --- state -------------------------------------------------------------------------------

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        return {f"l{index}_{key}": value for index, layer in enumerate(self.cells)
                for key, value in layer.state_shapes().items()}

    def _split_state(self, state: State) -> list[State]:
        bounds = list(itertools.accumulate(self._field_counts, initial=0))
        return [layer.state_type._make(state[start:stop])
                for layer, start, stop in zip(self.cells, bounds, bounds[1:], strict=False)]

    def _join_state(self, states: Sequence[State]) -> State:
        return self.state_type._make(itertools.chain.from_iterable(states))

    # --- aux keys ----------------------------------------------------------------------------

    def _merge(self, per_layer: Sequence[Mapping[str, Tensor]]) -> dict[str, Tensor]:
        return {f"{prefix}{key}": value for prefix, values in zip(self._prefixes, per_layer,
                                                                   strict=True)
                for key, value in values.items()}

    def _split(self, merged: Mapping[str, Tensor]) -> list[dict[str, Tensor]]:
        return [{key[len(prefix):]: value for key, value in merged.items()
                 if key.startswith(prefix)} for prefix in self._prefixes]

    # --- the recurrence ----------------------------------------------------------------------

    def _between_layers(self, y: Tensor) -> Tensor:
        return nn.functional.dropout(y, self.dropout, self.training) if self.dropout else y

    def project_input(self, x: Tensor) -> Tensor:
        return self.cells[0].project_input(x)

    def step(self, x_t: Tensor, state: State) -> tuple[Tensor, State, dict[str, Tensor]]:
        new_states, traces = [], []
        y = x_t
        for index, (layer, layer_state) in enumerate(zip(self.cells, self._split_state(state),
                                                         strict=True)):
            if index:  # x_t arrives projected by layer 0; the others project their own input
                y = layer.project_input(self._between_layers(y).unsqueeze(0))[0]
            y, layer_state, trace = layer.step(y, layer_state)
            new_states.append(layer_state)
            traces.append(trace)
        return y, self._join_state(new_states), self._merge(traces)

    def fast_scan(self, x: Tensor, state: State, resets: Tensor) -> ScanResult:
        """Layer after layer over the whole chunk, each through its own ``_scan`` (its engine,
        or its ``scan(step)``)."""
        new_states, traces = [], []
        y = x
        for index, (layer, layer_state) in enumerate(zip(self.cells, self._split_state(state),
                                                         strict=True)):
            if index:
                y = self._between_layers(y)
            y, layer_state, trace = layer._scan(y, layer_state, resets)
            new_states.append(layer_state)
            traces.append(trace)
        return ScanResult(y, self._join_state(new_states), self._merge(traces))

    # --- what the layers add and report ------------------------------------------------------

    def aux_losses(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        return self._merge([layer.aux_losses(layer_traces) for layer, layer_traces
                            in zip(self.cells, self._split(traces), strict=True)])

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        return self._merge([layer.diagnostics(layer_traces) for layer, layer_traces
                            in zip(self.cells, self._split(traces), strict=True)])

    def anneal(self, progress: float) -> None:
        for layer in self.cells:
            layer.anneal(progress)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_layers={self.num_layers}, dropout={self.dropout}"

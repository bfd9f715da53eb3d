"""The cell contract: :class:`Cell`, its state, its auxiliary outputs, and the reset-aware scan.

Every memory cell in rlmem is a :class:`Cell`. A cell consumes a time-major sequence and a
per-environment reset mask, and returns its outputs and its final state::

    cell = make_cell("relstm", input_size=64, hidden_size=64)
    state = cell.initial_state(batch_size=16)
    y, state = cell(x, state, resets)            # x: (T, B, input_size), resets: (T, B) bool

``resets[t, b]`` means that ``x[t, b]`` is the first input of a new episode, so the state of
``b`` is set back to :meth:`Cell.initial_state` *before* ``x[t, b]`` is consumed. The initial
state is all zeros, which is what makes ``state * (1 - episode_start)`` masking (sb3-contrib)
equivalent to a reset.

A cell implements one time step (:meth:`Cell.step`); the loop over time and the resets are
written once, in :func:`scan`, and ``scan(step)`` is the cell's specification. A cell may also
have an engine (a fused kernel, a hand-written backward, a compiled loop: the private package
:mod:`rlmem.cells._engines`), which it names in :meth:`Cell.fast_scan`; :meth:`Cell._scan` runs
the engine where it applies and ``scan(step)`` everywhere else, and a test proves every engine
equal to its cell's ``scan(step)`` (``tests/cells/test_engines.py``). What a cell adds to the loss
and what it reports come back explicitly in :class:`Aux` from :meth:`Cell.forward_aux`.
"""

from __future__ import annotations

import abc
import functools
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple, final

import torch
from torch import Tensor, nn

from rlmem.cells.time_loop import ScanResult, State, scan


@dataclass(frozen=True, init=False)
class Dims:
    """The shape of one state field per batch item, and its dtype, declared on the field.

    A cell's state is declared once, as a NamedTuple whose fields carry their ``Dims``;
    :meth:`Cell.initial_state`, the shape checks and sb3's packing read them from there::

        class MyState(NamedTuple):
            h: Annotated[Tensor, Dims("hidden_size")]             # (B, hidden_size)
            slots: Annotated[Tensor, Dims("capacity", "hidden_size")]
            t: Annotated[Tensor, Dims(dtype=torch.long)]          # (B,) long

    Attributes:
        sizes: each an int, or the name of an argument of the cell's ``__init__``
            (``"hidden_size"``, a hyperparameter), whose value the cell keeps as the attribute
            of that name; registration checks that the names exist.
        dtype: the field's dtype; ``None`` means the dtype of the floating fields (the
            parameters').
    """

    sizes: tuple[str | int, ...]
    dtype: torch.dtype | None

    def __init__(self, *sizes: str | int, dtype: torch.dtype | None = None) -> None:
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "dtype", dtype)


@functools.cache
def state_dims(state_type: type) -> Mapping[str, Dims]:
    """The :class:`Dims` of each field of a NamedTuple state class, in field order.

    Raises:
        TypeError: ``state_type`` is not a NamedTuple class, or a field is not annotated
            ``Annotated[Tensor, Dims(...)]`` (exactly one ``Dims``), naming the field.
    """
    fields = getattr(state_type, "_fields", None)
    if not isinstance(state_type, type) or not issubclass(state_type, tuple) or fields is None:
        raise TypeError(f"a cell's state_type must be a NamedTuple class, got {state_type!r}")
    try:
        hints = typing.get_type_hints(state_type, include_extras=True)
    except NameError as error:
        raise TypeError(f"{state_type.__name__}: an annotation does not resolve "
                        f"({error})") from error
    dims: dict[str, Dims] = {}
    for key in fields:
        found = [item for item in getattr(hints.get(key), "__metadata__", ())
                 if isinstance(item, Dims)]
        if len(found) != 1:
            raise TypeError(f"{state_type.__name__}.{key}: declare its shape once, as "
                            f"`{key}: Annotated[Tensor, Dims(...)]`")
        dims[key] = found[0]
    return MappingProxyType(dims)

class Aux:
    """What a cell contributes besides its output, returned by :meth:`Cell.forward_aux`.

    Attributes:
        losses: scalar, differentiable terms that the trainer adds to its loss, already weighted
            by the cell's own coefficient (SA-RNN's ``λ Σ ũ``, TARNN's ``Ω``).
        diagnostics: detached scalars to log once per update (SA-RNN skip %, TARNN mean β, ...).
            Given as a function, they are worked out on first access only: a rollout step
            never reads them, and for the attentive cells they cost about a quarter of a
            rollout step. Read them before an optimizer step: some report parameters (η, α).
        traces: detached per-step tensors of shape ``(T, B, ...)`` for figures (attention
            weights, update masks, β over time).
    """

    def __init__(self, losses: dict[str, Tensor] | None = None,
                 diagnostics: dict[str, Tensor] | Callable[[], dict[str, Tensor]] | None = None,
                 traces: dict[str, Tensor] | None = None) -> None:
        self.losses = losses if losses is not None else {}
        self.traces = traces if traces is not None else {}
        self._diagnostics = diagnostics if diagnostics is not None else {}

    @property
    def diagnostics(self) -> dict[str, Tensor]:
        if callable(self._diagnostics):
            self._diagnostics = self._diagnostics()
        return self._diagnostics

    def total_loss(self) -> Tensor | float:
        """The sum of :attr:`losses` (``0.0`` when the cell adds nothing)."""
        return sum(self.losses.values(), 0.0)

    def __repr__(self) -> str:
        # Showing an Aux must not work out its diagnostics (a debugger prints it freely).
        diagnostics = ("not yet worked out" if callable(self._diagnostics)
                       else sorted(self._diagnostics))
        return (f"Aux(losses={sorted(self.losses)}, diagnostics={diagnostics}, "
                f"traces={sorted(self.traces)})")


class CellOutput(NamedTuple):
    """The result of :meth:`Cell.forward_aux`."""

    output: Tensor
    state: Any
    aux: Aux


class CellContractError(ValueError):
    """A cell returned what its contract rules out (outputs not ``(T, B, output_size)``)."""


class Cell(nn.Module, abc.ABC):
    """Base class of every rlmem memory cell.

    A subclass defines its :attr:`state_type` (a NamedTuple class whose fields declare their
    :class:`Dims`) and :meth:`step`. It may override :meth:`project_input`,
    :meth:`aux_losses`, :meth:`diagnostics`, :meth:`anneal` and, to run an engine,
    :meth:`fast_scan`.

    The reference loop, :func:`scan` over :meth:`step`, which every engine must equal::

        xp = cell.project_input(x)                  # the input terms, all steps at once
        for t in range(T):
            state = where(resets[t], zeros, state)  # per batch item, before x[t]
            y[t], state, traces[t] = cell.step(xp[t], state)

    Args:
        input_size: features of each input ``x[t, b]``.
        hidden_size: features of the hidden state; also :attr:`output_size`.
    """

    state_type: type[State]
    """The NamedTuple class of this cell's state; each field annotated with its :class:`Dims`.
    A class attribute, except for a stack, whose state depends on its layers."""

    name: ClassVar[str] = ""
    """Registry name, set by :func:`rlmem.cells.registry.register`."""

    episode_bound: ClassVar[str | None] = None
    """The int hyperparameter bounding how many steps of an episode the cell holds exactly
    (MemLSTM's ``capacity``: past it, its attention becomes a sliding window), or None for a
    cell that holds an episode of any length the same way. It sizes no weight, so an
    evaluation on longer episodes raises it (:func:`rlmem.cells.registry.full_attention`)."""

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        for arg, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{type(self).__name__}: {arg} must be a positive int, "
                                 f"got {value!r}")
        self.input_size = input_size
        self.hidden_size = hidden_size

    @property
    def output_size(self) -> int:
        """Features of each output ``y[t, b]``."""
        return self.hidden_size

    # --- state -------------------------------------------------------------------------------

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        """Per-field shape without the batch dim, and dtype (``None``: the parameters' dtype),
        from the :class:`Dims` of :attr:`state_type`'s fields, in field order."""
        return {key: (tuple(size if isinstance(size, int) else getattr(self, size)
                            for size in dims.sizes), dims.dtype)
                for key, dims in state_dims(self.state_type).items()}

    def initial_state(self, batch_size: int, device: torch.device | str | None = None,
                      dtype: torch.dtype | None = None) -> Any:
        """The all-zeros state; exactly what a reset produces.

        Args:
            batch_size: number of independent sequences (environments).
            device: defaults to the device of the cell's parameters.
            dtype: dtype of the floating fields; defaults to the parameters' dtype.
        """
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        reference = next(self.parameters(), None)
        device = device if device is not None else (
            reference.device if reference is not None else None)
        dtype = dtype if dtype is not None else (
            reference.dtype if reference is not None else torch.get_default_dtype())
        shapes = self.state_shapes()
        return self.state_type._make(
            torch.zeros((batch_size, *shape), device=device,
                        dtype=field_dtype if field_dtype is not None else dtype)
            for shape, field_dtype in (shapes[key] for key in self.state_type._fields))

    def state_size(self) -> int:
        """Number of scalars in the state of one batch item (used to pack it, e.g. for SB3)."""
        return sum(math.prod(shape) for shape, _ in self.state_shapes().values())

    # --- the recurrence ----------------------------------------------------------------------

    def project_input(self, x: Tensor) -> Tensor:
        """The terms of every step that depend on the input alone, for all ``T × B`` at once.

        One matmul over the whole sequence costs far less than ``T`` small ones inside the
        loop. :meth:`step` receives ``project_input(x)[t]``. The default is ``x`` itself.

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, *)``
        """
        return x

    @abc.abstractmethod
    def step(self, x_t: Tensor, state: Any) -> tuple[Tensor, Any, dict[str, Tensor]]:
        """One time step: ``(y_t, new_state, traces_t)``.

        ``x_t`` is step ``t`` of :meth:`project_input` (the raw input unless a cell projects
        it), of shape ``(B, *)``.
        """

    def fast_scan(self, x: Tensor, state: Any, resets: Tensor) -> ScanResult | None:
        """An engine's run of the chunk, or ``None`` where no engine applies.

        The one hook through which a cell runs faster than ``scan(step)``: a cell with an
        engine overrides it to hand its tensors (inputs, weights, state, resets,
        hyperparameters) to its engine module in :mod:`rlmem.cells._engines`, which takes no
        cell and returns ``None`` for what it does not cover (a dtype, a device, an option).
        Whatever it returns must equal :func:`scan` over :meth:`step`, outputs, state, traces
        and gradients, and ``tests/cells/test_engines.py`` lists which engine is proven equal
        to which step. The default: no engine.

        Shapes: as :meth:`_scan`.
        """
        return None

    @final
    def _scan(self, x: Tensor, state: Any, resets: Tensor) -> ScanResult:
        """The time loop: the engine's result if :meth:`fast_scan` gives one, else
        :func:`scan` over :meth:`step` (the specification). Written once, here.

        Shapes:
            - x: ``(T, B, input_size)``; state: the state before ``x[0]``; resets: ``(T, B)``
            - returns ``(T, B, output_size)`` outputs, the final state and the traces
        """
        result = self.fast_scan(x, state, resets)
        if result is not None:
            return result
        return scan(self.step, self.project_input(x), state, resets)

    def forward(self, x: Tensor, state: Any | None = None,
                resets: Tensor | None = None) -> tuple[Tensor, Any]:
        """Run the cell over a sequence.

        Args:
            x: inputs, time-major.
            state: the state before ``x[0]``; ``None`` means :meth:`initial_state`.
            resets: ``resets[t, b]`` re-initialises the state of ``b`` before ``x[t, b]``;
                ``None`` means no resets.

        Shapes:
            - x: ``(T, B, input_size)``
            - resets: ``(T, B)``, bool
            - output: ``(T, B, output_size)``, and the state after ``x[T-1]``
        """
        result = self.forward_aux(x, state, resets)
        return result.output, result.state

    def forward_aux(self, x: Tensor, state: Any | None = None,
                    resets: Tensor | None = None) -> CellOutput:
        """Like :meth:`forward`, also returning the cell's :class:`Aux` losses and diagnostics.

        Shapes:
            as :meth:`forward`; ``aux.traces`` values are ``(T, B, ...)``.
        """
        x, state, resets = self._validate(x, state, resets)
        y, state, traces = self._scan(x, state, resets)
        if y.shape != (*x.shape[:2], self.output_size):  # two tuples: no cost worth caching
            raise CellContractError(
                f"cell {self.name or type(self).__name__!r} ({type(self).__module__}."
                f"{type(self).__qualname__}) returned outputs of shape {tuple(y.shape)} for "
                f"inputs of shape {tuple(x.shape)}; its output_size is {self.output_size}, so "
                f"(T, B, output_size) = {(*x.shape[:2], self.output_size)} was due. The cell "
                "breaks the cell contract (rlmem.cells.base): fix its step, or its "
                "output_size. No update was made with it; any checkpoint on disk is as it was.")
        traces_detached = {key: value.detach() for key, value in traces.items()}
        aux = Aux(losses=self.aux_losses(traces),
                  diagnostics=lambda: {key: value.detach() for key, value
                                       in self.diagnostics(traces_detached).items()},
                  traces=traces_detached)
        return CellOutput(y, state, aux)

    def aux_losses(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        """Weighted, differentiable loss terms computed from the (undetached) step traces."""
        return {}

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        """Scalars to log, computed from the step traces."""
        return {}

    def anneal(self, progress: float) -> None:
        """Follow a schedule over training; ``progress`` runs from 0 (start) to 1 (end)."""

    # --- checks ------------------------------------------------------------------------------

    def _validate(self, x: Tensor, state: Any | None,
                  resets: Tensor | None) -> tuple[Tensor, Any, Tensor]:
        name = type(self).__name__
        if not isinstance(x, Tensor) or x.dim() != 3:
            raise ValueError(f"{name}: x must be a (T, B, input_size) tensor, got "
                             f"{tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__}")
        steps, batch, features = x.shape
        if features != self.input_size:
            raise ValueError(f"{name}: x has {features} features but input_size is "
                             f"{self.input_size}")
        if not x.is_floating_point():
            raise TypeError(f"{name}: x must be floating point, got {x.dtype}")
        if state is None:
            state = self.initial_state(batch, device=x.device, dtype=x.dtype)
        elif not isinstance(state, self.state_type):
            raise TypeError(f"{name}: state must be a {self.state_type.__name__} (from "
                            f"initial_state), got {type(state).__name__}")
        else:
            for key, (shape, _) in self.state_shapes().items():
                value = getattr(state, key)
                if tuple(value.shape) != (batch, *shape):
                    raise ValueError(f"{name}: state.{key} has shape {tuple(value.shape)}, "
                                     f"expected {(batch, *shape)} for a batch of {batch}")
        if resets is None:
            resets = torch.zeros(steps, batch, dtype=torch.bool, device=x.device)
        else:
            if tuple(resets.shape) != (steps, batch):
                raise ValueError(f"{name}: resets must have shape (T, B) = {(steps, batch)}, "
                                 f"got {tuple(resets.shape)}")
            resets = resets.to(device=x.device, dtype=torch.bool)
        return x, state, resets

    def extra_repr(self) -> str:
        return f"input_size={self.input_size}, hidden_size={self.hidden_size}"

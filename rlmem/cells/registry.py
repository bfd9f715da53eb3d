"""The registry of cells: ``CELLS``, :func:`register`, :func:`make_cell` and typed configs.

A cell's ``__init__`` signature is the single source of its hyperparameters: their names, types
and defaults. :func:`cell_config` turns it into the typed dataclass that backs the cell's Hydra
config (``rlmem/conf/memory/<name>.yaml``), so the two cannot drift apart.

Every cell also stacks: ``num_layers`` and ``dropout`` (:class:`~rlmem.cells.stacked.Stacked`)
are arguments of :func:`make_cell` and fields of every cell's config.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, TypeVar

from rlmem.cells.base import Cell
from rlmem.cells.stacked import Stacked, check_stack

CELLS: dict[str, type[Cell]] = {}
"""Registered cells, by name."""

DEFAULT_HIDDEN_SIZE = 64
"""The hidden size of a memory config that does not set one (the ReLSTM paper's RL setting)."""

_RUNTIME_ARGS = ("self", "input_size", "hidden_size")

_STACK_ARGS: dict[str, tuple[type, Any]] = {"num_layers": (int, 1), "dropout": (float, 0.0)}
"""What :func:`make_cell` and every config take besides the cell's own hyperparameters."""

C = TypeVar("C", bound=type[Cell])


def register(name: str) -> typing.Callable[[C], C]:
    """Class decorator: add a :class:`Cell` subclass to :data:`CELLS` under ``name``."""

    def decorator(cls: C) -> C:
        if name in CELLS:
            raise ValueError(f"a cell named {name!r} is already registered ({CELLS[name]})")
        clash = sorted(set(hyperparameters(cls)) & set(_STACK_ARGS))
        if clash:
            raise ValueError(f"cell {name!r}: hyperparameter(s) {clash} are reserved for "
                             f"stacking (make_cell's num_layers and dropout)")
        cls.name = name
        CELLS[name] = cls
        return cls

    return decorator


def get_cell_class(name: str) -> type[Cell]:
    """The class registered as ``name``, or a :class:`KeyError` that lists the valid names."""
    try:
        return CELLS[name]
    except KeyError:
        raise KeyError(f"unknown cell {name!r}; valid cells: {', '.join(sorted(CELLS))}") from None


def hyperparameters(cls: type[Cell]) -> dict[str, inspect.Parameter]:
    """The hyperparameters of a cell class: its ``__init__`` arguments after the sizes."""
    signature = inspect.signature(cls.__init__)
    return {key: value for key, value in signature.parameters.items()
            if key not in _RUNTIME_ARGS and value.kind is inspect.Parameter.KEYWORD_ONLY}


def make_cell(name: str, *, input_size: int, hidden_size: int = DEFAULT_HIDDEN_SIZE,
              num_layers: int = 1, dropout: float = 0.0, **hparams: Any) -> Cell:
    """Build the cell registered as ``name``, or a stack of ``num_layers`` of them.

    Args:
        name: a registered cell (:data:`CELLS`).
        input_size: features of each input.
        hidden_size: the cell's hidden size (of every layer, in a stack).
        num_layers: ``1`` gives the plain cell; more give a :class:`~rlmem.cells.Stacked`
            of that many cells with the same hyperparameters, layer 0 reading the input and
            each other layer the output of the one below.
        dropout: dropout probability between stacked layers (training mode only).
        hparams: the cell's hyperparameters (:func:`hyperparameters`).

    Raises:
        KeyError: unknown ``name``, listing the registered cells.
        TypeError: unknown hyperparameter, listing the valid ones.
        ValueError: ``num_layers < 1`` or ``dropout`` outside ``[0, 1)``.
    """
    cls = get_cell_class(name)
    valid = hyperparameters(cls)
    unknown = sorted(set(hparams) - set(valid))
    if unknown:
        raise TypeError(f"unknown hyperparameter(s) {unknown} for cell {name!r}; valid: "
                        f"{', '.join(sorted([*valid, *_STACK_ARGS]))}")
    check_stack(num_layers, dropout)
    if num_layers == 1:
        return cls(input_size, hidden_size, **hparams)
    layers: list[Cell] = []
    for _ in range(num_layers):
        layers.append(cls(layers[-1].output_size if layers else input_size, hidden_size,
                          **hparams))
    return Stacked(layers, dropout=dropout)


def _config_type(annotation: Any) -> Any:
    """A type OmegaConf can validate: ``Literal`` and unions of one type become that type."""
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return type(typing.get_args(annotation)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        inner = _config_type(args[0]) if len(args) == 1 else Any
        return typing.Optional[inner]  # noqa: UP045 - OmegaConf wants typing.Optional
    return annotation


_CONFIGS: dict[str, type] = {}


def cell_config(name: str) -> type:
    """The typed dataclass of cell ``name``'s Hydra config: ``name``, ``hidden_size``,
    ``num_layers``, ``dropout`` and the cell's hyperparameters with their defaults. The input
    size is derived at run time and is deliberately not part of it."""
    if name not in _CONFIGS:
        cls = get_cell_class(name)
        hints = typing.get_type_hints(cls.__init__)
        fields: list[tuple[str, Any, Any]] = [
            ("name", str, dataclasses.field(default=name)),
            ("hidden_size", int, dataclasses.field(default=DEFAULT_HIDDEN_SIZE)),
            *((key, kind, dataclasses.field(default=default))
              for key, (kind, default) in _STACK_ARGS.items()),
        ]
        for key, parameter in hyperparameters(cls).items():
            fields.append((key, _config_type(hints[key]),
                           dataclasses.field(default=parameter.default)))
        _CONFIGS[name] = dataclasses.make_dataclass(f"{cls.__name__}Config", fields)
    return _CONFIGS[name]


def make_cell_from_config(config: Any, *, input_size: int) -> Cell:
    """Build a cell from a memory config (a dataclass, DictConfig or mapping with ``name``)."""
    values = dict(config.items()) if hasattr(config, "items") else dataclasses.asdict(config)
    name = values.pop("name")
    return make_cell(name, input_size=input_size, **values)

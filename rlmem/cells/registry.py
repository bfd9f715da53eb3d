"""The registry of cells: ``CELLS``, :func:`register`, :func:`make_cell`, typed configs, and
where cells come from.

A new cell is one file. Its class, decorated with :func:`register`, enters :data:`CELLS` when
its module is imported, and two loaders import them all when :mod:`rlmem.cells` is imported:

- :func:`load_package_cells`: every public module of the :mod:`rlmem.cells` package;
- :func:`load_plugins`: the entry-point group :data:`ENTRY_POINT_GROUP` of every installed
  distribution, so that a cell in the user's own package shows up in ``memory=``, the CLIs and
  the contract tests (``tests/cells/test_cells.py``). A plug-in that fails to load is warned about
  once and recorded (:data:`BROKEN_PLUGINS`); only asking for its cell is an error, so one
  broken plug-in leaves every other cell, and every CLI, working.

A cell's ``__init__`` signature is the single source of its hyperparameters: their names, types
and defaults. :func:`register` checks it (``(self, input_size, hidden_size, *, ...)``, each
hyperparameter keyword-only, annotated and defaulted) and fails naming the cell and the
parameter. :func:`cell_config` turns it into the typed dataclass that Hydra stores as the cell's
``memory=<name>`` config (:mod:`rlmem.schema.memory`), so the two cannot drift apart.

Every cell also stacks: ``num_layers`` and ``dropout`` (:class:`~rlmem.cells.stacked.Stacked`)
are arguments of :func:`make_cell` and fields of every cell's config.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import pkgutil
import re
import types
import typing
import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

from omegaconf import OmegaConf

from rlmem.cells.base import Cell, state_dims
from rlmem.cells.stacked import Stacked, check_stack

CELLS: dict[str, type[Cell]] = {}
"""Registered cells, by name."""

ENTRY_POINT_GROUP = "rlmem.cells"
"""The entry-point group of cell plugins. An entry point names a module whose import registers
its cells (``my_rnn = my_package.my_rnn``), or a :class:`Cell` subclass, registered under the
entry point's name (``my_rnn = my_package.cells:MyRNN``)."""

DEFAULT_HIDDEN_SIZE = 64
"""The hidden size of a memory config that does not set one (the ReLSTM paper's RL setting).
``rlmem.train`` leaves it null instead, for the agent to decide (our PPO's preset: 64 on
MiniGrid, 256 elsewhere; :func:`rlmem.agents.train_config.with_derived_values`), and a run
records the size it took."""

_RUNTIME_ARGS = ("self", "input_size", "hidden_size")

_STACK_ARGS: dict[str, tuple[type, Any]] = {"num_layers": (int, 1), "dropout": (float, 0.0)}
"""What :func:`make_cell` and every config take besides the cell's own hyperparameters."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A cell name: usable as ``memory=<name>``, a run directory and a metric prefix."""

C = TypeVar("C", bound=type[Cell])


BROKEN_PLUGINS: dict[str, str] = {}
"""Entry points of :data:`ENTRY_POINT_GROUP` that failed to load, by name (the cell's name, by
convention): what failed, naming the entry point, its distribution and the error."""


class CellPluginWarning(UserWarning):
    """A cell plug-in failed to load: its cell is unavailable, every other cell works."""


class CellPluginError(KeyError):
    """A cell was asked for whose plug-in (an entry point of :data:`ENTRY_POINT_GROUP`) failed
    to load. A :class:`KeyError`, as for any unknown cell, so the CLIs report it in one line."""

    def __str__(self) -> str:
        # KeyError's own str() quotes its message; this one is a sentence.
        return str(self.args[0]) if self.args else ""


def register(name: str) -> typing.Callable[[C], C]:
    """Class decorator: add a :class:`Cell` subclass to :data:`CELLS` under ``name``.

    Raises:
        ValueError: ``name`` is taken or is not an identifier.
        TypeError: the class's ``__init__`` or state does not follow the contract
            (:func:`check_cell_class`), naming the cell and the parameter or field.
    """

    def decorator(cls: C) -> C:
        if name in CELLS:
            raise ValueError(f"a cell named {name!r} is already registered ({CELLS[name]})")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"cell name {name!r} must be an identifier (letters, digits, _)")
        check_cell_class(name, cls)
        cls.name = name
        CELLS[name] = cls
        return cls

    return decorator


def check_cell_class(name: str, cls: type) -> None:
    """Check a cell class against the contract that its config and state are derived from.

    - ``cls`` subclasses :class:`Cell`;
    - ``__init__(self, input_size, hidden_size, *, ...)``: every hyperparameter keyword-only
      (else it would be left out of the config), annotated with a type the config can hold,
      with a default of that type, and not one of ``name``, ``num_layers``, ``dropout``;
    - :attr:`Cell.state_type` is a NamedTuple whose fields declare their
      :class:`~rlmem.cells.base.Dims`, each size an int or an argument of ``__init__``.

    Raises:
        TypeError: naming the cell and the parameter or state field at fault.
        ValueError: a hyperparameter reserved for stacking or for the config's ``name``.
    """
    if not (isinstance(cls, type) and issubclass(cls, Cell)):
        raise TypeError(f"cell {name!r}: {cls!r} is not a subclass of rlmem.cells.Cell")
    parameters = list(inspect.signature(cls.__init__).parameters.values())
    runtime = parameters[:len(_RUNTIME_ARGS)]
    leading = [parameter.name for parameter in runtime]
    if tuple(leading) != _RUNTIME_ARGS or any(
            parameter.kind is parameter.KEYWORD_ONLY for parameter in runtime):
        raise TypeError(f"cell {name!r}: {cls.__name__}.__init__ must start with (self, "
                        f"input_size, hidden_size, *, ...), got ({', '.join(leading)}, ...)")
    try:
        hints = typing.get_type_hints(cls.__init__)
    except NameError as error:
        raise TypeError(f"cell {name!r}: an annotation of {cls.__name__}.__init__ does not "
                        f"resolve ({error})") from error
    for parameter in parameters[len(_RUNTIME_ARGS):]:
        _check_hyperparameter(name, parameter, hints.get(parameter.name))
    bound = cls.episode_bound
    if bound is not None and (bound not in hyperparameters(cls)
                              or hints.get(bound) is not int):
        raise TypeError(f"cell {name!r}: episode_bound={bound!r} names no int hyperparameter "
                        f"of {cls.__name__}.__init__")
    sizes = {*_RUNTIME_ARGS[1:], *hyperparameters(cls)}
    try:
        declared = state_dims(getattr(cls, "state_type", None))
    except TypeError as error:
        raise TypeError(f"cell {name!r}: {error}") from error
    for key, dims in declared.items():
        unknown = [size for size in dims.sizes if isinstance(size, str) and size not in sizes]
        if unknown:
            raise TypeError(f"cell {name!r}: state field {key!r} is sized by {unknown}, which "
                            f"name no argument of {cls.__name__}.__init__ "
                            f"({', '.join(sorted(sizes))})")


def _check_hyperparameter(name: str, parameter: inspect.Parameter, hint: Any) -> None:
    """One hyperparameter of cell ``name``: keyword-only, annotated, defaulted, configurable."""
    where = f"cell {name!r}: hyperparameter {parameter.name!r}"
    if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
        raise TypeError(f"cell {name!r}: __init__ takes {parameter}; every hyperparameter must "
                        f"be a named keyword-only argument (it becomes a config field)")
    if parameter.kind is not parameter.KEYWORD_ONLY:
        raise TypeError(f"{where} must be keyword-only (after `*` in __init__), with a type "
                        f"and a default; otherwise it would be left out of the config")
    if hint is None or parameter.default is parameter.empty:
        raise TypeError(f"{where} needs a type annotation and a default: its config field "
                        f"is typed and defaulted by them")
    if parameter.name in ("name", *_STACK_ARGS):
        raise ValueError(f"{where} is reserved: {parameter.name} is a field of every memory "
                         f"config (the cell's name, make_cell's num_layers and dropout)")
    probe = dataclasses.make_dataclass("Probe", [(
        parameter.name, _config_type(hint), dataclasses.field(default=parameter.default))])
    try:
        OmegaConf.structured(probe)
    except Exception as error:  # OmegaConf's errors for unsupported types and bad defaults vary
        raise TypeError(f"{where}: its type {getattr(hint, '__name__', hint)} or default "
                        f"{parameter.default!r} does not fit a typed config "
                        f"({type(error).__name__}: {str(error).splitlines()[0]})") from error


def load_package_cells(package: types.ModuleType) -> None:
    """Import every public module of ``package`` (:mod:`rlmem.cells`), registering its cells.

    A new cell module is found without being listed anywhere. Private modules (``_name``) and
    subpackages are skipped; the helpers and engines that are public modules are imported by
    the cells anyway, so importing them here costs nothing.
    """
    for module in pkgutil.iter_modules(package.__path__):
        if not module.ispkg and not module.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{module.name}")


def load_plugins() -> None:
    """Register the cells of installed distributions' :data:`ENTRY_POINT_GROUP` entry points.

    Idempotent: a module is imported once, and a class already registered is skipped. An entry
    point that fails to load, or names neither a module nor a :class:`Cell` subclass, is
    recorded in :data:`BROKEN_PLUGINS` and warned about once (:class:`CellPluginWarning`,
    naming the entry point, its distribution and the error); asking for its cell then raises
    :class:`CellPluginError` (:func:`get_cell_class`).
    """
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry_point.name in BROKEN_PLUGINS:
            continue  # warned once already
        try:
            loaded = entry_point.load()
            if isinstance(loaded, type) and issubclass(loaded, Cell):
                if loaded not in CELLS.values():
                    register(entry_point.name)(loaded)
            elif not isinstance(loaded, types.ModuleType):
                raise TypeError(f"it names {loaded!r}, neither a module of cells nor a Cell "
                                f"subclass")
        except Exception as error:  # whatever a plug-in raises, the other cells work on
            source = f", from {entry_point.dist.name}" if entry_point.dist else ""
            BROKEN_PLUGINS[entry_point.name] = (
                f"cell plugin {entry_point.name!r} ({entry_point.value}{source}, entry-point "
                f"group {ENTRY_POINT_GROUP!r}) failed to load: {type(error).__name__}: {error}")
            warnings.warn(f"{BROKEN_PLUGINS[entry_point.name]}. {_unavailable(entry_point.name)}",
                          CellPluginWarning, stacklevel=2)


def _unavailable(name: str) -> str:
    """What a broken plug-in of cell ``name`` leaves: no ``memory=<name>``, or, where another
    cell is registered under its name (a built-in it would have shadowed), that cell."""
    if name in CELLS:
        return (f"memory={name} stays the cell registered before it "
                f"({CELLS[name].__module__}.{CELLS[name].__qualname__}), not the plug-in's; "
                "every cell works.")
    return (f"memory={name} is unavailable until the plug-in is fixed or uninstalled; every "
            "other cell works.")


def get_cell_class(name: str) -> type[Cell]:
    """The class registered as ``name``.

    Raises:
        CellPluginError: ``name`` is the cell of a plug-in that failed to load.
        KeyError: ``name`` is no cell at all; the message lists the valid names.
    """
    if name in CELLS:
        return CELLS[name]
    if name in BROKEN_PLUGINS:
        raise CellPluginError(
            f"memory={name} is the cell of a {BROKEN_PLUGINS[name]}. Nothing was run; fix the "
            "plug-in or reinstall it, or choose another memory (the other cells work).")
    raise KeyError(f"unknown cell {name!r}; valid cells: {', '.join(sorted(CELLS))}")


def unavailable_config(name: str) -> type:
    """The ``memory=<name>`` config of a plug-in that failed to load: it composes (so
    ``memory=<name>`` is not called unknown), and building it raises the plug-in's
    :class:`CellPluginError`, before any work."""

    def refuse(self: Any) -> None:
        get_cell_class(name)

    fields = [("name", str, dataclasses.field(default=name)),
              ("hidden_size", int | None, dataclasses.field(default=DEFAULT_HIDDEN_SIZE)),
              *((key, kind, dataclasses.field(default=default))
                for key, (kind, default) in _STACK_ARGS.items())]
    return dataclasses.make_dataclass(f"Unavailable{name.title()}Config", fields,
                                      namespace={"__post_init__": refuse})


def hyperparameters(cls: type[Cell]) -> dict[str, inspect.Parameter]:
    """The hyperparameters of a cell class: its ``__init__`` arguments after the sizes."""
    signature = inspect.signature(cls.__init__)
    return {key: value for key, value in signature.parameters.items()
            if key not in _RUNTIME_ARGS and value.kind is inspect.Parameter.KEYWORD_ONLY}


def full_attention(memory: Mapping[str, Any], steps: int | None,
                   given: Mapping[str, Any] | None = None) -> dict[str, int]:
    """The ``eval_memory`` with which the cell of the memory config ``memory`` holds every step
    of episodes up to ``steps`` long, as the paper's full attention does: its
    :attr:`~rlmem.cells.base.Cell.episode_bound` (MemLSTM's ``capacity``) raised to ``steps``
    where it is lower. Empty where it is not, where the evaluation was ``given`` a value for
    it, for a cell without a bound, for a name that is no cell, and where ``steps`` is unknown
    (None: an env without a step limit).

    >>> full_attention({"name": "memlstm", "capacity": 256}, 2560)
    {'capacity': 2560}
    >>> full_attention({"name": "memlstm", "capacity": 256}, 2560, given={"capacity": 256})
    {}
    >>> full_attention({"name": "relstm"}, 2560)
    {}
    """
    cls = CELLS.get(str(memory.get("name")))
    bound = cls.episode_bound if cls is not None else None
    if cls is None or bound is None or steps is None or bound in (given or {}):
        return {}
    held = memory.get(bound, hyperparameters(cls)[bound].default)
    return {bound: steps} if held < steps else {}


def widened_note(memory: Mapping[str, Any], widened: Mapping[str, int]) -> str:
    """What a program says when it evaluates the cell of ``memory`` with the ``widened``
    bound of :func:`full_attention`: the values, trained and evaluated, and how to choose
    another."""
    settings = ", ".join(f"{key}={value}" for key, value in widened.items())
    trained = ", ".join(f"{key}={memory.get(key)}" for key in widened)
    # The cell's own model, not "the paper's": the same line is printed for any env.
    return (f"{memory.get('name')} (trained with {trained}) is evaluated with {settings}, "
            f"enough to hold every step, as the cell's own model does; "
            f"+eval_memory.{next(iter(widened))}=... sets another value")


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
    if origin in (typing.Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        inner = _config_type(args[0]) if len(args) == 1 else Any
        return typing.Optional[inner]  # noqa: UP045 - OmegaConf wants typing.Optional
    return annotation


def cell_config(name: str) -> type:
    """The typed dataclass of cell ``name``'s Hydra config: ``name``, ``hidden_size``,
    ``num_layers``, ``dropout`` and the cell's hyperparameters with their defaults. The input
    size is derived at run time and is deliberately not part of it."""
    return _config_of(get_cell_class(name))


@functools.cache
def _config_of(cls: type[Cell]) -> type:
    hints = typing.get_type_hints(cls.__init__)
    fields: list[tuple[str, Any, Any]] = [
        ("name", str, dataclasses.field(default=cls.name)),
        ("hidden_size", int | None, dataclasses.field(default=DEFAULT_HIDDEN_SIZE)),
        *((key, kind, dataclasses.field(default=default))
          for key, (kind, default) in _STACK_ARGS.items()),
    ]
    for key, parameter in hyperparameters(cls).items():
        fields.append((key, _config_type(hints[key]),
                       dataclasses.field(default=parameter.default)))
    return dataclasses.make_dataclass(f"{cls.__name__}Config", fields)


def make_cell_from_config(config: Any, *, input_size: int) -> Cell:
    """Build a cell from a memory config (a dataclass, DictConfig or mapping with ``name``)."""
    values = dict(config.items()) if hasattr(config, "items") else dataclasses.asdict(config)
    name = values.pop("name")
    if values.get("hidden_size") is None:
        raise ValueError(f"memory.hidden_size of memory={name} is undecided (null): a run "
                         "decides it before building its cell; set memory.hidden_size")
    return make_cell(name, input_size=input_size, **values)

"""The registry of supervised tasks: ``TASKS``, :func:`register_task` and :func:`make_task`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from rlmem.tasks.base import SequenceTask

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

TASKS: dict[str, type[SequenceTask]] = {}
"""Registered tasks, by name."""

T = TypeVar("T", bound=type[SequenceTask])


def register_task(name: str) -> Callable[[T], T]:
    """Class decorator: add a :class:`SequenceTask` subclass to :data:`TASKS` as ``name``."""

    def decorator(cls: T) -> T:
        if name in TASKS:
            raise ValueError(f"a task named {name!r} is already registered ({TASKS[name]})")
        cls.name = name
        TASKS[name] = cls
        return cls

    return decorator


def make_task(name: str, **kwargs: Any) -> SequenceTask:
    """Build the task registered as ``name``.

    Raises:
        KeyError: unknown ``name``, listing the registered tasks.
        TypeError: unknown keyword, as raised by the task's constructor.
    """
    try:
        cls = TASKS[name]
    except KeyError:
        raise KeyError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}") \
            from None
    return cls(**kwargs)


def make_task_from_config(config: DataclassInstance | Mapping[str, Any]) -> SequenceTask:
    """Build a task from a task config (a dataclass such as
    :class:`~rlmem.schema.supervised.TaskConfig`, or a DictConfig or mapping with ``name``)."""
    values = dict(config.items()) if hasattr(config, "items") else dataclasses.asdict(config)
    return make_task(values.pop("name"), **values)

"""The ``wrappers`` of a run: gymnasium wrappers named by import path, applied in order.

A run records its wrappers as plain data (``"gymnasium.wrappers:TimeLimit"``, or a mapping
``{target: ..., kwargs: {...}}``), so its ``config.yaml`` and checkpoint say exactly how its env
was built, and evaluation rebuilds the same env.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import gymnasium as gym

WRAPPER_KEYS = frozenset({"target", "kwargs"})
"""The keys of a wrapper given as a mapping."""


@dataclass(frozen=True)
class WrapperSpec:
    """One wrapper: ``target(env, **kwargs)``."""

    target: str
    """Import path, ``module:Name`` (``gymnasium.wrappers:TimeLimit``) or ``module.Name``."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments after the env."""

    def resolve(self) -> Callable[..., gym.Env]:
        """The wrapper class (or function) the import path names.

        Raises:
            ValueError: the module or the name does not exist, or it is not callable.
        """
        module_name, sep, attribute = self.target.partition(":")
        if not sep:
            module_name, _, attribute = self.target.rpartition(".")
        if not module_name or not attribute:
            raise ValueError(f"wrapper {self.target!r}: write it as module:Name, e.g. "
                             "gymnasium.wrappers:TimeLimit")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ValueError(f"wrapper {self.target!r}: cannot import {module_name!r} "
                             f"({error})") from error
        wrapper = module
        for part in attribute.split("."):
            if not hasattr(wrapper, part):
                raise ValueError(f"wrapper {self.target!r}: {module_name!r} has no {attribute!r}")
            wrapper = getattr(wrapper, part)
        if not callable(wrapper):
            raise ValueError(f"wrapper {self.target!r} is not a class or function")
        return wrapper

    def apply(self, env: gym.Env) -> gym.Env:
        """``env`` wrapped by this wrapper."""
        return self.resolve()(env, **self.kwargs)


WrapperItem: TypeAlias = str | Mapping[str, Any] | WrapperSpec
"""One item of a run's ``wrappers``: an import path, a mapping with ``target`` and optionally
``kwargs``, or a parsed :class:`WrapperSpec`."""


def parse_wrappers(items: Iterable[WrapperItem]) -> tuple[WrapperSpec, ...]:
    """The :class:`WrapperSpec` of every item of a run's ``wrappers`` list.

    An item is an import path, or a mapping with ``target`` and optionally ``kwargs``.

    Raises:
        ValueError: an item is neither; the message shows both forms.
    """
    specs = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            specs.append(WrapperSpec(item))
        elif isinstance(item, WrapperSpec):
            specs.append(item)
        elif isinstance(item, Mapping) and "target" in item and set(item) <= WRAPPER_KEYS:
            specs.append(WrapperSpec(str(item["target"]), dict(item.get("kwargs") or {})))
        else:
            raise ValueError(
                f"wrappers[{index}]={item!r}: give an import path such as "
                "'gymnasium.wrappers:TimeLimit', or {target: <import path>, kwargs: {...}}")
    return tuple(specs)


def apply_wrappers(env: gym.Env, wrappers: Iterable[WrapperItem]) -> gym.Env:
    """``env`` wrapped by each of ``wrappers`` (items as :func:`parse_wrappers` takes), the
    first innermost."""
    for spec in parse_wrappers(wrappers):
        env = spec.apply(env)
    return env

"""The ``wrappers`` of a run: gymnasium wrappers named by import path, applied in order.

A run records its wrappers as plain data (``"gymnasium.wrappers:TimeLimit"``, or a mapping
``{target: ..., kwargs: {...}}``), so its ``config.yaml`` and checkpoint say exactly how its env
was built, and evaluation rebuilds the same env.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import gymnasium as gym

from rlmem.envs.trust import module_of

WRAPPER_KEYS = frozenset({"target", "kwargs"})
"""The keys of a wrapper given as a mapping."""


@dataclass(frozen=True)
class WrapperSpec:
    """One wrapper: ``target(env, **kwargs)``."""

    target: str
    """Import path, ``module:Name`` (``gymnasium.wrappers:TimeLimit``) or ``module.Name``."""
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments after the env."""

    def resolve(self) -> type[gym.Wrapper[Any, Any, Any, Any]]:
        """The wrapper class the import path names.

        The module is imported (a config read from a run must pass
        :func:`rlmem.envs.trust.refuse_untrusted_code` first), and the name must be a
        :class:`gymnasium.Wrapper` subclass whatever the trust: a wrapper is called with the env
        and the recorded kwargs, and nothing else may be.

        Raises:
            ValueError: the module or the name does not exist, or it is not a gymnasium
                wrapper class.
        """
        module_name, attribute = module_of(self.target), self.target.partition(":")[2]
        if ":" not in self.target:
            attribute = self.target.rpartition(".")[2]
        parts = attribute.split(".")
        if not module_name or not all(part.isidentifier() and not part.startswith("_")
                                      for part in parts):
            raise ValueError(f"wrapper {self.target!r}: write it as module:Name, e.g. "
                             "gymnasium.wrappers:TimeLimit (public names only)")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise ValueError(f"wrapper {self.target!r}: cannot import {module_name!r} "
                             f"({error})") from error
        wrapper: object = module
        for part in parts:
            if not hasattr(wrapper, part):
                raise ValueError(f"wrapper {self.target!r}: {module_name!r} has no {attribute!r}")
            wrapper = getattr(wrapper, part)
        if not (isinstance(wrapper, type) and issubclass(wrapper, gym.Wrapper)):
            raise ValueError(f"wrapper {self.target!r} is {wrapper!r}, not a gymnasium.Wrapper "
                             "subclass; a wrapper must be a class deriving from "
                             "gymnasium.Wrapper (or ObservationWrapper, ActionWrapper, ...)")
        return wrapper

    def apply(self, env: gym.Env) -> gym.Env:
        """``env`` wrapped by this wrapper.

        Raises:
            ValueError: the wrapper cannot be resolved (:meth:`resolve`), or its constructor
                refuses ``env`` or the kwargs; the message names the wrapper, the env as it
                reaches the wrapper and where the wrapper's code failed, not a traceback.
        """
        wrapper = self.resolve()
        try:
            return wrapper(env, **self.kwargs)
        except Exception as error:  # any failure of a wrapper named by the user's config
            frame = traceback.extract_tb(error.__traceback__)[-1]
            # A bare ``assert`` says nothing but its source line, so that is shown instead.
            why = f" ({error})" if str(error) else f": {frame.line}" if frame.line else ""
            raise ValueError(
                f"wrapper {self.target!r} refused the env it wraps, {env} (gymnasium.make's "
                f"own wrappers included), with kwargs {dict(self.kwargs)}: "
                f"{type(error).__name__}{why}, at {frame.filename}:{frame.lineno}") from error


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

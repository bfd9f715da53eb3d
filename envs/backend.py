"""Which backend steps a run's envs: ``gymnasium`` (any env, one Python object per copy),
``tensor`` (the batched torch envs of :mod:`rlmem.envs.tensor`) or ``auto``, the tensor backend
where the env has a tensor version and the run asks nothing of it that only the original can
do (a wrapper, an ``env_kwargs`` option the tensor env does not honour), else gymnasium.

:func:`resolve_backend` decides ``auto`` once, before any env is made, so that a run records
the backend it used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rlmem.envs.tensor.registry import no_tensor_env, tensor_env_name, unsupported_options
from rlmem.envs.wrappers import WrapperItem, parse_wrappers

AUTO, TENSOR, GYMNASIUM = "auto", "tensor", "gymnasium"
BACKENDS = (AUTO, TENSOR, GYMNASIUM)
"""The values of ``backend`` (a run's ``env_backend``)."""


def resolve_backend(backend: str, name: str, *, wrappers: Iterable[WrapperItem] = (),
                    env_kwargs: Mapping[str, Any] | None = None) -> str:
    """``tensor`` or ``gymnasium``: ``backend`` with ``auto`` decided for env ``name``.

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`; or it is ``tensor`` and the
            env has no tensor version (the paragraph names those that have one), or the run
            gives it wrappers or ``env_kwargs`` it does not honour.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}; use one of {', '.join(BACKENDS)}")
    if backend == GYMNASIUM:
        return GYMNASIUM
    has_wrappers = bool(parse_wrappers(wrappers))
    unsupported = unsupported_options(name, env_kwargs or {})
    if tensor_env_name(name) is not None and not has_wrappers and not unsupported:
        return TENSOR
    if backend == AUTO:
        return GYMNASIUM
    if tensor_env_name(name) is None:
        raise ValueError(no_tensor_env(name))
    why = ("wrappers, which wrap gymnasium envs only" if has_wrappers
           else f"env_kwargs {unsupported}, which its tensor version does not honour")
    raise ValueError(f"env {name!r} cannot run on the tensor backend with {why}. Drop them, or "
                     "use backend=gymnasium (or auto) to run the original env.")

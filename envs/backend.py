"""Which backend steps a run's envs: ``gymnasium`` (any env, one Python object per copy),
``tensor`` (the batched torch envs of :mod:`rlmem.envs.tensor`) or ``auto``, the tensor backend
where the env has a tensor version and the run asks nothing of it that only the original can
do (a wrapper without a tensor version, an ``env_kwargs`` option the tensor env does not
honour), else gymnasium. A POPGym env's wrappers that have a tensor version
(:data:`rlmem.envs.tensor.popgym.wrappers.TENSOR_WRAPPERS`: the previous action, the flattened
observation) run on the tensor backend too.

:func:`resolve_backend` decides ``auto`` once, before any env is made, so that a run records
the backend it used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rlmem.envs.tensor.popgym import POPGYM_TENSOR_ENVS
from rlmem.envs.tensor.popgym.wrappers import TENSOR_WRAPPERS
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
    has_wrappers = not tensor_wrappable(name, wrappers)
    unsupported = unsupported_options(name, env_kwargs or {})
    if tensor_env_name(name) is not None and not has_wrappers and not unsupported:
        return TENSOR
    if backend == AUTO:
        return GYMNASIUM
    if tensor_env_name(name) is None:
        raise ValueError(no_tensor_env(name))
    why = ("wrappers that have no tensor version (a POPGym env's previous action and "
           "flattened observation have one)" if has_wrappers
           else f"env_kwargs {unsupported}, which its tensor version does not honour")
    raise ValueError(f"env {name!r} cannot run on the tensor backend with {why}. Drop them, or "
                     "use backend=gymnasium (or auto) to run the original env.")


def tensor_wrappable(name: str, wrappers: Iterable[WrapperItem]) -> bool:
    """Whether the tensor env of ``name`` can take ``wrappers``: none, or, for a POPGym env,
    only wrappers with a tensor version and no keyword arguments."""
    specs = parse_wrappers(wrappers)
    if not specs:
        return True
    return tensor_env_name(name) in POPGYM_TENSOR_ENVS and all(
        spec.resolve() in TENSOR_WRAPPERS and not spec.kwargs for spec in specs)

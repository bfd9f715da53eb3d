"""The code a recorded config names, and when rlmem may import it.

A run directory is data. Its ``config.yaml`` and checkpoint record how the run's env was made,
and two of their keys name Python modules: ``env=module:EnvId`` (gymnasium imports ``module``
so that it registers the env) and each of ``wrappers`` (``module:Wrapper``). Importing a module
runs its code, and a wrapper is called, so a run shared by someone else, downloaded or unpacked
from an archive could run anything through them, as ``trust_remote_code`` guards against for
model hubs.

So a config read from a run, as opposed to one the user typed, may name only modules of the
packages rlmem itself depends on (:data:`SAFE_PACKAGES`) unless the user opts in with
``trust_run_config=true``. Every reader of runs calls :func:`refuse_untrusted_code` before it
interprets the recorded env: evaluation, resuming, the sb3 loader and the experiment scripts.
Whatever the trust, a wrapper must be a :class:`gymnasium.Wrapper` subclass
(:meth:`rlmem.envs.wrappers.WrapperSpec.resolve`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

SAFE_PACKAGES = ("gymnasium", "minigrid", "rlmem", "popgym")
"""Top-level packages whose modules a run's config may name without ``trust_run_config``: those
rlmem depends on and imports anyway, whose import runs no code a run could choose. POPGym is an
optional extra of rlmem that :func:`rlmem.envs.env_spec` imports itself for POPGym's short
names; its envs' ids name it (``popgym:popgym-RepeatPreviousEasy-v0``)."""

TRUST_KEY = "trust_run_config"
"""The opt-in, as the CLIs spell it."""


class UntrustedCodeError(ValueError):
    """A config read from a run names code to import, and the user did not opt in."""


def module_of(target: str) -> str:
    """The module an import path names: ``pkg.mod:Name`` and ``pkg.mod.Name`` give
    ``pkg.mod``."""
    module, sep, _ = target.partition(":")
    return module if sep else target.rpartition(".")[0]


def is_safe_module(module: str) -> bool:
    """Whether ``module`` lies in one of :data:`SAFE_PACKAGES`."""
    return module.partition(".")[0] in SAFE_PACKAGES


def named_imports(config: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``(key, import path)`` for every value of a run's config that would import a module:
    ``env`` and ``transfer_env`` in the ``module:EnvId`` form, and each wrapper's target."""
    for key in ("env", "transfer_env"):
        value = config.get(key)
        if isinstance(value, str) and ":" in value:
            yield key, value
    for index, item in enumerate(config.get("wrappers") or ()):
        target = item.get("target") if isinstance(item, Mapping) else item
        yield f"wrappers[{index}]", str(target)


def refuse_untrusted_code(config: Mapping[str, Any], *, source: str, trusted: bool,
                          given: Collection[str] = ()) -> None:
    """Refuse a config read from ``source`` if it names a module outside
    :data:`SAFE_PACKAGES`, unless ``trusted``.

    Args:
        config: the config as the run recorded it.
        source: the file it was read from, for the message.
        trusted: the user's ``trust_run_config``.
        given: import paths the user named themselves in this command (a run resuming its own
            ``env=my_module:MyEnv`` names it again): those are not the run's choice.

    Raises:
        UntrustedCodeError: naming the key, the module and the opt-in.
    """
    if trusted:
        return
    for key, target in named_imports(config):
        module = module_of(target)
        if is_safe_module(module) or target in given:
            continue
        raise UntrustedCodeError(
            f"{source} records {key}={target!r}, which would import and run the Python "
            f"module {module!r}. A run directory is data, and rlmem runs no code that a run "
            f"names unless you say so: nothing was imported, loaded or written. If you trust "
            f"whoever made this run and the module {module!r} installed here, pass "
            f"{TRUST_KEY}=true; only modules of {', '.join(SAFE_PACKAGES)} are imported "
            "without it.")

"""Restoring a checkpoint's saved states into the objects its config builds, or saying why
not.

A checkpoint's config decides the shapes of the model it rebuilds; its ``states`` must fit that
model. They do unless the file was altered, or written by another trainer than its config
names (an ``agent=sb3`` policy under an ``agent=ppo`` config). Torch reports such a file with a
size-mismatch traceback, or a bare ``KeyError``; every trainer and actor loader goes through
:func:`load_state` instead, which names the file, the state and what does not fit, says that
nothing on disk changed, and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from rlmem.runs.checkpoint import Checkpoint, CheckpointMismatchError

SHOWN = 3
"""How many keys of each kind of mismatch a message names."""

ON_RESUME = "Start afresh with resume=false, or move the file away."
"""What to do when a trainer cannot resume a checkpoint's states."""

ON_EVALUATE = "Evaluate a run whose checkpoint rlmem wrote, or train this one afresh."
"""What to do when an actor cannot be rebuilt from a checkpoint's states."""


class IncompatibleStateError(CheckpointMismatchError):
    """A checkpoint's saved states do not fit the model or optimizer its own config builds."""


class Restorable(Protocol):
    """Anything with torch's ``load_state_dict``: a module, an optimizer."""

    def load_state_dict(self, state_dict: Any, /) -> Any: ...


def state_mismatches(module: nn.Module, state: Mapping[str, Any]) -> list[str]:
    """How ``state`` fails to fit ``module``'s own state dict: missing and unexpected keys and
    differing shapes, each kind naming at most :data:`SHOWN` keys; empty when it fits."""
    expected = module.state_dict()
    problems: list[str] = []
    for kind, keys in (("lacks", [key for key in expected if key not in state]),
                       ("has no place for", [key for key in state if key not in expected])):
        if keys:
            problems.append(f"it {kind} {_some(keys)}")
    shapes = [f"{key} is {list(value.shape)} where the model has {list(expected[key].shape)}"
              for key, value in state.items() if key in expected and isinstance(value, Tensor)
              and value.shape != expected[key].shape]
    if shapes:
        problems.append(_some(shapes, quote=False))
    return problems


def saved_state(checkpoint: Checkpoint, name: str, path: Path, remedy: str) -> Any:
    """``checkpoint.states[name]``, or :class:`IncompatibleStateError` naming what the file
    holds instead (``policy`` where its config's agent writes ``model``)."""
    if name in checkpoint.states:
        return checkpoint.states[name]
    held = ", ".join(map(repr, checkpoint.states)) or "none"
    raise IncompatibleStateError(
        f"{path} has no {name!r} state, which a run of its config ({_describe(checkpoint)}) "
        f"saves; its states are: {held}. It was altered, or written by another trainer than "
        f"its config names. {_untouched(remedy)}")


def fitting_state(module: nn.Module, checkpoint: Checkpoint, name: str, path: Path,
                  remedy: str) -> Mapping[str, Any]:
    """``checkpoint.states[name]``, checked to fit ``module`` (keys and shapes) without loading
    it: ``module`` may live on the ``meta`` device.

    Raises:
        IncompatibleStateError: the state is missing or does not fit.
    """
    state = saved_state(checkpoint, name, path, remedy)
    problems = (state_mismatches(module, state) if isinstance(state, Mapping)
                else [f"it is a {type(state).__name__}, not a state dict"])
    if problems:
        raise _does_not_fit(module, checkpoint, name, path, problems, remedy)
    return state


def load_state(target: Restorable, checkpoint: Checkpoint, name: str, path: Path,
               remedy: str) -> None:
    """Load ``checkpoint.states[name]`` into ``target`` (a module or an optimizer built from
    the checkpoint's config).

    Args:
        target: what the state is loaded into.
        checkpoint: the checkpoint read from ``path``.
        name: the state's key (``model``, ``policy``, ``optimizer``).
        path: the checkpoint file, for the message.
        remedy: what the user can do, ending the message (resume=false, another run).

    Raises:
        IncompatibleStateError: the state is missing or does not fit ``target``; a module is
            checked before anything is loaded into it.
    """
    state = (fitting_state(target, checkpoint, name, path, remedy)
             if isinstance(target, nn.Module) else saved_state(checkpoint, name, path, remedy))
    try:
        target.load_state_dict(state)
    except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as error:
        text = str(error).strip()
        raise _does_not_fit(target, checkpoint, name, path, [
            f"torch refuses it ({type(error).__name__}: "
            f"{text.splitlines()[0] if text else 'no message'})"], remedy) from None


def _does_not_fit(target: object, checkpoint: Checkpoint, name: str, path: Path,
                  problems: list[str], remedy: str) -> IncompatibleStateError:
    return IncompatibleStateError(
        f"{path}: its {name!r} state does not fit the {type(target).__name__} its own config "
        f"builds ({_describe(checkpoint)}): {'; '.join(problems)}. The file was altered, or "
        f"written by another program or version than its config says. {_untouched(remedy)}")


def restore_rng(generator: torch.Generator, checkpoint: Checkpoint, name: str, path: Path,
                remedy: str) -> None:
    """Give ``generator`` (``torch.default_generator``, a run's own data generator) the state
    ``checkpoint.rng[name]``, on the CPU, where generator states live.

    A state goes on only in a generator of its own kind: a CUDA generator's state (16 bytes)
    cannot continue in a CPU one (5,056 bytes), nor back. Such a state is named for what it is,
    a run resumed on another kind of device than it trained on, before torch is asked.

    Raises:
        IncompatibleStateError: there is no such state, it is another kind of device's, or
            the generator refuses it.
    """
    state = checkpoint.rng.get(name)
    if not isinstance(state, Tensor):
        problem = f"has no {name!r} generator state"
    elif state.numel() != (size := generator.get_state().numel()):
        raise IncompatibleStateError(
            f"{path} holds a {name!r} generator state of {state.numel():,} bytes where this "
            f"run's {generator.device.type} generator keeps {size:,}: it drew its random "
            f"numbers on another kind of device than this run's {generator.device.type} (its "
            f"config says device={checkpoint.config.get('device')}; a CUDA generator's state is "
            "16 bytes, a CPU one's 5,056), or the file was altered. A generator's state goes on "
            "only on its own kind: resume a run with the device it trained on, on a machine "
            f"that has one. {_untouched(remedy)}")
    else:
        try:
            generator.set_state(state.cpu())
            return
        except (RuntimeError, ValueError, TypeError) as error:
            problem = (f"holds a {name!r} generator state that torch refuses "
                       f"({type(error).__name__}: {str(error).strip()})")
    raise IncompatibleStateError(
        f"{path} {problem}, which a run of its config ({_describe(checkpoint)}) saves. It was "
        f"altered, or written by another program. {_untouched(remedy)}")


def _describe(checkpoint: Checkpoint) -> str:
    """The config keys that decide the shapes, as a reader knows them: ``agent=ppo
    memory=lstm memory.hidden_size=64``."""
    config = checkpoint.config
    parts = [f"{section}={config[section]['name']}" for section in ("agent", "task", "memory")
             if isinstance(config.get(section), Mapping) and "name" in config[section]]
    memory = config.get("memory")
    if isinstance(memory, Mapping) and "hidden_size" in memory:
        parts.append(f"memory.hidden_size={memory['hidden_size']}")
    return " ".join(parts) or "no agent, task or memory recorded"


def _some(items: list[str], quote: bool = True) -> str:
    shown = [repr(item) if quote else item for item in items[:SHOWN]]
    more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
    return ", ".join(shown) + more


def _untouched(remedy: str) -> str:
    return f"The file is as it was. {remedy}"

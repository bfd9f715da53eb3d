"""Whether two envs present the same interface to an agent: what its weights depend on.

A trained agent can act in another env (its transfer target, or any env) when that env's
observation and action spaces have the same structure: the same field names, space types,
shapes and dtypes, and the same numbers of discrete values. Box bounds may differ (a wider
track, a longer corridor): the weights do not depend on them.

An observation of such a space (or a vector env's batch of them) is an :data:`Observation`.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from gymnasium import spaces

Observation: TypeAlias = np.ndarray | dict[str, np.ndarray]
"""An observation, or a vector env's batch of them, as the agents read it: an array, or a Dict
space's arrays by key (SB3's ``predict`` takes the same)."""


OBSERVATION_FIELD = "observation"
"""The field name under which an observation that is not a Dict is read as fields: by our PPO's
encoders, and by :class:`~rlmem.envs.previous_action.PreviousAction`, which keeps such an
observation under it beside the previous action."""


class IncompatibleEnvError(ValueError):
    """An env's observation or action space differs from the one an agent was trained on."""


def space_signature(space: spaces.Space[Any]) -> object:
    """The structure of ``space`` that a model's weights depend on, as comparable plain data.

    Example: ``{"image": ("GridSpace", (7, 7, 3), "uint8"), ...}`` for a MiniGrid Dict.
    """
    if isinstance(space, spaces.Dict):
        return {key: space_signature(value) for key, value in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(space_signature(value) for value in space.spaces)
    if isinstance(space, spaces.Discrete):
        return ("Discrete", int(space.n), int(space.start))
    if isinstance(space, spaces.MultiDiscrete):
        return ("MultiDiscrete", space.nvec.tolist(), space.start.tolist())
    if isinstance(space, spaces.MultiBinary):
        return ("MultiBinary", tuple(space.shape))
    if isinstance(space, spaces.Box):
        return (type(space).__name__, tuple(space.shape), str(space.dtype))
    return (type(space).__name__, str(space))


def describe_space(space: spaces.Space[Any]) -> str:
    """``space`` in words, for messages (``uint8 GridSpace of shape [7, 7, 3]``)."""
    if isinstance(space, spaces.Dict):
        return "{" + ", ".join(f"{key}: {describe_space(value)}"
                               for key, value in space.spaces.items()) + "}"
    if isinstance(space, spaces.Discrete):
        return f"Discrete({space.n})" + (f" from {space.start}" if space.start else "")
    if isinstance(space, spaces.MultiDiscrete):
        return f"MultiDiscrete({space.nvec.tolist()})"
    if isinstance(space, spaces.Box):
        return f"{space.dtype} {type(space).__name__} of shape {list(space.shape)}"
    return str(space)


def interface_mismatch(observation_space: spaces.Space[Any], action_space: spaces.Space[Any],
                       reference_observation: spaces.Space[Any],
                       reference_action: spaces.Space[Any]) -> str | None:
    """None when the first pair of spaces has the structure of the reference pair; else what
    differs, in words (the first pair first)."""
    differences = []
    if space_signature(observation_space) != space_signature(reference_observation):
        differences.append(f"observes {describe_space(observation_space)} instead of "
                           f"{describe_space(reference_observation)}")
    if space_signature(action_space) != space_signature(reference_action):
        differences.append(f"acts in {describe_space(action_space)} instead of "
                           f"{describe_space(reference_action)}")
    return " and ".join(differences) if differences else None

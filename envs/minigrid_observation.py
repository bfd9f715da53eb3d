"""MiniGrid's observation encoding: the egocentric grid, and the mission as token ids of a fixed
vocabulary.

The vocabulary is fixed, not grown from the missions seen in training, so that a training env
and its transfer target (or any two MiniGrid envs) map the same word to the same id and a trained
mission encoder can be evaluated anywhere.

The two fields get their own space types, :class:`GridSpace` and :class:`MissionSpace` (both
:class:`~gymnasium.spaces.Box`, so gymnasium and SB3 treat them as any Box): the agent picks its
encoder by the space's type, and these types say "MiniGrid grid indices" and "mission tokens,
visible at every step", which a Box's shape and bounds cannot.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from minigrid.core.constants import COLOR_NAMES, DIR_TO_VEC, OBJECT_TO_IDX
from minigrid.minigrid_env import MiniGridEnv

MISSION_LENGTH = 32
"""Tokens per encoded mission; longer missions are cut, shorter ones padded with :data:`PAD`."""

PAD = 0
"""Token id of padding."""

UNKNOWN = 1
"""Token id of a word outside :data:`VOCABULARY`."""

_MISSION_WORDS = (
    # MiniGrid missions
    "a", "after", "and", "at", "avoid", "blue", "box", "end", "find", "fetch", "from", "get", "go",
    "goal", "green", "hallway", "key", "lava", "matching", "must", "near", "object", "of",
    "open", "opening", "pick", "put", "reach", "room", "rooms", "square", "the", "then", "to",
    "traverse", "unlock", "up", "use", "you",
    # BabyAI grammar
    "behind", "front", "in", "left", "next", "on", "right", "your",
)

VOCABULARY: tuple[str, ...] = ("<pad>", "<unk>", *sorted(
    {*_MISSION_WORDS, *COLOR_NAMES, *OBJECT_TO_IDX}))
"""Every known mission word; ``VOCABULARY[i]`` is the word of token id ``i``."""

_WORD_IDS = {word: index for index, word in enumerate(VOCABULARY)}


def tokenize(mission: str, length: int = MISSION_LENGTH) -> np.ndarray:
    """Token ids of ``mission``: lower-cased words, unknown ones as :data:`UNKNOWN`, padded.

    Shapes:
        - returns ``(length,)`` int64
    """
    ids = [_WORD_IDS.get(word, UNKNOWN) for word in re.findall(r"[a-z]+", mission.lower())]
    tokens = np.full(length, PAD, dtype=np.int64)
    tokens[:min(len(ids), length)] = ids[:length]
    return tokens


class GridSpace(spaces.Box):
    """MiniGrid's egocentric grid encoding: an (object, colour, state) *index* per cell.

    A Box like any other for gymnasium and SB3; its type tells the agent to use MiniGrid's grid
    encoder (:class:`rlmem.agents.minigrid_encoders.ImageEncoder`) rather than a pixel conv net.
    """


class MissionSpace(spaces.Box):
    """The mission as token ids of :data:`VOCABULARY`, padded with :data:`PAD`.

    A Box like any other for gymnasium and SB3; its type tells the agent to encode it with
    :class:`rlmem.agents.minigrid_encoders.MissionEncoder` and to join it *after* the memory (it is
    visible at every step, so there is nothing to remember about it).
    """


MINIGRID_FIELDS = frozenset({"image", "direction", "mission"})
"""The fields of MiniGrid's own observation, which :class:`MiniGridObservation` reads."""


def is_minigrid(env: gym.Env) -> bool:
    """Whether ``env`` is a MiniGrid env that still observes MiniGrid's Dict (with ``image``),
    i.e. one that :class:`MiniGridObservation` applies to."""
    space = env.observation_space
    return (isinstance(env.unwrapped, MiniGridEnv) and isinstance(space, spaces.Dict)
            and "image" in space.spaces)


def mission_varies(env: gym.Env) -> bool:
    """Whether ``env``'s mission text changes between episodes (MiniGrid's mission space has
    placeholders then, as in ``go to the {color} {type}``)."""
    mission = getattr(env.unwrapped, "observation_space", None)
    mission_space = mission.spaces.get("mission") if isinstance(mission, spaces.Dict) else None
    return getattr(mission_space, "ordered_placeholders", None) is not None


def _agent_view_size(env: gym.Env) -> int | None:
    """The view size of ``env``'s agent: a wrapper's (``ViewSizeWrapper``), else the env's."""
    try:
        return int(env.get_wrapper_attr("agent_view_size"))
    except AttributeError:
        return None


def encoded_space(image: spaces.Space[Any], view: int | None, mission: bool,
                  direction: bool) -> spaces.Dict:
    """The observation space of :class:`MiniGridObservation` over a MiniGrid env whose image
    space is ``image`` and whose agent sees ``view`` cells across (None: unknown); the tensor
    MiniGrid envs (:mod:`rlmem.envs.tensor.minigrid`) take theirs from here too."""
    fields: dict[str, spaces.Space[Any]] = {"image": image}
    if isinstance(image, spaces.Box) and image.shape == (view, view, 3):
        fields["image"] = GridSpace(image.low, image.high, image.shape, image.dtype)
    if direction:
        fields["direction"] = spaces.Discrete(len(DIR_TO_VEC))
    if mission:
        fields["mission"] = MissionSpace(0, len(VOCABULARY) - 1, (MISSION_LENGTH,), np.int64)
    return spaces.Dict(fields)


class MiniGridObservation(gym.ObservationWrapper):
    """MiniGrid's ``{"image", "direction", "mission"}`` -> ``{"image"[, "direction"][,
    "mission"]}`` arrays.

    The image's space becomes a :class:`GridSpace` when it is the agent's view of grid indices
    (``(view, view, 3)``); an image a wrapper turned into pixels (``RGBImgPartialObsWrapper``)
    keeps its plain Box, so the agent treats it as pixels. The mission's space is a
    :class:`MissionSpace`.

    Args:
        env: a MiniGrid env (its observation is a Dict with an ``image``).
        mission: include the tokenised mission.
        direction: include the agent's compass heading, a ``Discrete(4)`` (0 east, 1 south,
            2 west, 3 north). The egocentric view does not show it: in a corridor, looking
            one way or the other can give the same view.

    Shapes:
        - ``image``: ``(view, view, 3)`` uint8, MiniGrid's (object, colour, state) grid encoding
        - ``direction``: ``()`` int64
        - ``mission``: ``(MISSION_LENGTH,)`` int64 token ids
    """

    def __init__(self, env: gym.Env, mission: bool, direction: bool = False) -> None:
        super().__init__(env)
        source = env.observation_space
        name = env.spec.id if env.spec else env
        if not isinstance(source, spaces.Dict) or "image" not in source.spaces:
            raise ValueError(f"{name}: not a MiniGrid env, its observation space {source} has "
                             "no 'image'")
        added = sorted(set(source.spaces) - MINIGRID_FIELDS)
        if added:
            # Only MiniGrid's own fields are encoded: any other would be dropped unseen.
            raise ValueError(f"{name}: a wrapper added {added} to "
                             "MiniGrid's observation, and rlmem encodes only MiniGrid's own "
                             f"fields ({', '.join(sorted(MINIGRID_FIELDS))}): the added ones "
                             "would be dropped without a word. A wrapper that adds fields "
                             "cannot be used on a MiniGrid env.")
        self.observation_space = encoded_space(source["image"], _agent_view_size(env),
                                               mission, direction)
        self._mission = mission
        self._direction = direction
        self._tokens: dict[str, np.ndarray] = {}

    def observation(self, observation: dict[str, Any]) -> dict[str, np.ndarray]:
        encoded = {"image": observation["image"]}
        if self._direction:
            encoded["direction"] = np.int64(observation["direction"])
        if self._mission:
            text = observation["mission"]
            if text not in self._tokens:  # missions repeat: tokenise each text once
                self._tokens[text] = tokenize(text)
            encoded["mission"] = self._tokens[text]
        return encoded

"""Observation encoding: the egocentric image, and the mission as token ids of a fixed vocabulary.

The vocabulary is fixed, not grown from the missions seen in training, so that a training env
and its transfer target (or any two MiniGrid envs) map the same word to the same id and a trained
mission encoder can be evaluated anywhere.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from minigrid.core.constants import COLOR_NAMES, OBJECT_TO_IDX

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


def mission_varies(env: gym.Env) -> bool:
    """Whether ``env``'s mission text changes between episodes (MiniGrid's mission space has
    placeholders then, as in ``go to the {color} {type}``)."""
    mission = getattr(env.unwrapped, "observation_space", None)
    mission_space = mission.spaces.get("mission") if isinstance(mission, spaces.Dict) else None
    return getattr(mission_space, "ordered_placeholders", None) is not None


class MiniGridObservation(gym.ObservationWrapper):
    """MiniGrid's ``{"image", "direction", "mission"}`` -> ``{"image"[, "mission"]}`` arrays.

    Args:
        env: a MiniGrid env (its observation is a Dict with an ``image``).
        mission: include the tokenised mission.

    Shapes:
        - ``image``: ``(view, view, 3)`` uint8, MiniGrid's (object, colour, state) grid encoding
        - ``mission``: ``(MISSION_LENGTH,)`` int64 token ids
    """

    def __init__(self, env: gym.Env, mission: bool) -> None:
        super().__init__(env)
        source = env.observation_space
        if not isinstance(source, spaces.Dict) or "image" not in source.spaces:
            raise ValueError(f"{env.spec.id if env.spec else env}: not a MiniGrid env, its "
                             f"observation space {source} has no 'image'")
        fields: dict[str, spaces.Space[Any]] = {"image": source["image"]}
        if mission:
            fields["mission"] = spaces.Box(0, len(VOCABULARY) - 1, (MISSION_LENGTH,), np.int64)
        self.observation_space = spaces.Dict(fields)
        self._tokens: dict[str, np.ndarray] = {}

    def observation(self, observation: dict[str, Any]) -> dict[str, np.ndarray]:
        encoded = {"image": observation["image"]}
        if "mission" in self.observation_space.spaces:
            text = observation["mission"]
            if text not in self._tokens:  # missions repeat: tokenise each text once
                self._tokens[text] = tokenize(text)
            encoded["mission"] = self._tokens[text]
        return encoded

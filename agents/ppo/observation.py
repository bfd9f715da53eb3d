"""How observations enter the agent: fields, and one encoder per field chosen by its space.

Every observation is handled as a mapping of *fields*: a Dict space's keys, or the single field
:data:`~rlmem.envs.spaces.OBSERVATION_FIELD` of any other space. :func:`field_encoder` is the one
place that picks an encoder for a field, by the type of its space:

=======================================  ==============================================
space                                    encoder
=======================================  ==============================================
:class:`~rlmem.envs.GridSpace`           MiniGrid's grid encoder (``grid_encoding``)
:class:`~rlmem.envs.MissionSpace`        MiniGrid's mission encoder, joined after memory
Box image, uint8, at least 36×36         SB3's NatureCNN
other Box, MultiBinary                   SB3's flatten, then an MLP layer
Discrete, MultiDiscrete                  one-hot or embedding (``discrete_encoding``)
=======================================  ==============================================

MiniGrid's ``image`` and ``mission`` are just the Dict case. SB3's ``CombinedExtractor`` is not
used for Dicts: its choice per key is fixed (NatureCNN or flatten), it has no place for a field
that joins after the memory, and its ``extractors.<key>`` parameter names would rename the
MiniGrid model's weights, which old checkpoints store as ``image.*`` and ``mission.*``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor

from rlmem.agents.minigrid_encoders import FieldEncoder, ImageEncoder, MissionEncoder
from rlmem.agents.ppo.space_encoders import (
    DiscreteEncoder,
    PixelEncoder,
    VectorEncoder,
    is_pixel_space,
)
from rlmem.envs import GridSpace, MissionSpace, Observation
from rlmem.envs.spaces import OBSERVATION_FIELD

SUPPORTED = ("Box, Discrete, MultiDiscrete, MultiBinary, or a Dict of these (one level)")


class UnsupportedObservationSpaceError(ValueError):
    """The agent cannot encode this observation space."""


def observation_fields(space: spaces.Space[Any]) -> dict[str, spaces.Space[Any]]:
    """The fields of an observation space: a Dict's entries, or ``{"observation": space}``."""
    if isinstance(space, spaces.Dict):
        return dict(space.spaces)
    return {OBSERVATION_FIELD: space}


def observation_arrays(observation: Observation) -> Mapping[str, np.ndarray]:
    """An observation (or a batch of them) as its fields, like :func:`observation_fields`."""
    if isinstance(observation, Mapping):
        return observation
    return {OBSERVATION_FIELD: observation}


def observation_to_tensors(observation: Observation, device: torch.device
                           ) -> dict[str, Tensor]:
    """A batch of observations from a vector env as tensors on ``device``, by field."""
    return {key: torch.as_tensor(value, device=device)
            for key, value in observation_arrays(observation).items()}


def add_time(observation: dict[str, Tensor]) -> dict[str, Tensor]:
    """A batch of observations as a sequence of one step: each field ``(B, ...)`` ->
    ``(1, B, ...)``."""
    return {key: value.unsqueeze(0) for key, value in observation.items()}


def stack_observations(observations: list[Observation], device: torch.device
                       ) -> dict[str, Tensor]:
    """Single observations (e.g. a vector env's ``final_obs``) stacked into a batch, by field."""
    fields = [observation_arrays(observation) for observation in observations]
    return {key: torch.as_tensor(np.stack([field[key] for field in fields]), device=device)
            for key in fields[0]}


def field_encoder(space: spaces.Space[Any], grid_encoding: str = "embedding",
                  discrete_encoding: str = "onehot", folded_grid: bool = False) -> FieldEncoder:
    """The encoder of one observation field, chosen by the type of its space (table above);
    ``folded_grid``: a MiniGrid grid's encoder folds its first block (:class:`ImageEncoder`).

    Raises:
        UnsupportedObservationSpaceError: no encoder for this space (Text, Graph, Sequence,
            Tuple, a nested Dict, ...).
    """
    # MiniGrid's types first: they are Boxes too.
    if isinstance(space, GridSpace):
        height, width, channels = space.shape  # MiniGridObservation makes it (view, view, 3)
        return ImageEncoder((height, width, channels), grid_encoding, folded=folded_grid)
    if isinstance(space, MissionSpace):
        return MissionEncoder(int(space.high.max()) + 1)
    if isinstance(space, spaces.Box) and is_pixel_space(space):
        return PixelEncoder(space)
    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        return VectorEncoder(space)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return DiscreteEncoder(space, discrete_encoding)
    raise UnsupportedObservationSpaceError(
        f"cannot encode observations of {space}; supported: {SUPPORTED}. Wrap the env to turn "
        "its observations into one of these.")


def check_observation_space(space: spaces.Space[Any], grid_encoding: str = "embedding",
                            discrete_encoding: str = "onehot") -> None:
    """Raise :class:`UnsupportedObservationSpaceError` unless every field of ``space`` has an
    encoder that feeds the memory something."""
    fields = observation_fields(space)
    with torch.random.fork_rng(devices=[]):
        encoders = {key: field_encoder(value, grid_encoding, discrete_encoding)
                    for key, value in fields.items()}
    if all(encoder.after_memory for encoder in encoders.values()):
        raise UnsupportedObservationSpaceError(
            f"the observation space {space} has nothing for the memory to read (only "
            f"{', '.join(encoders)}, which join after it)")

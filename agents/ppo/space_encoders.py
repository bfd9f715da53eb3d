"""Encoders of one observation field of any gymnasium env, built on stable-baselines3's
preprocessing (``preprocess_obs``) and extractors (``FlattenExtractor``, ``NatureCNN``).

MiniGrid's own fields have their encoders in :mod:`rlmem.agents.minigrid_encoders`;
:func:`rlmem.agents.ppo.observation.field_encoder` picks one for each field by its space's type.
Each is a :class:`~rlmem.agents.minigrid_encoders.FieldEncoder`: it maps a flat batch
``(N, *field shape)`` to ``(N, output_size)`` features, and says with ``after_memory`` whether its
features enter the memory (False) or join the memory's output (True: for what is visible at every
step).
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.preprocessing import (
    is_image_space,
    is_image_space_channels_first,
    preprocess_obs,
)
from stable_baselines3.common.torch_layers import FlattenExtractor, NatureCNN
from torch import Tensor, nn

from rlmem.agents.encoding_names import DISCRETE_ENCODINGS
from rlmem.agents.minigrid_encoders import FieldEncoder

VECTOR_FEATURES = 64
"""Features of :class:`VectorEncoder` (the size of MiniGrid's grid encoding)."""

PIXEL_FEATURES = 256
"""Features of :class:`PixelEncoder` (SB3's ``CombinedExtractor`` uses 256 per image too)."""

DISCRETE_EMBEDDING_SIZE = 8
"""Features per component of the ``embedding`` encoding of :class:`DiscreteEncoder`."""

NATURE_CNN_MIN_SIZE = 36
"""The smallest height and width NatureCNN's three convolutions accept."""


def is_pixel_space(space: spaces.Box) -> bool:
    """Whether ``space`` is an image for NatureCNN: uint8 in [0, 255], three dims (SB3's
    :func:`is_image_space`), and at least :data:`NATURE_CNN_MIN_SIZE` pixels on each side."""
    if not is_image_space(space, check_channels=False):
        return False
    height, width = _channels_first_shape(space)[1:]
    return min(height, width) >= NATURE_CNN_MIN_SIZE


def _channels_first_shape(space: spaces.Box) -> tuple[int, int, int]:
    shape = tuple(int(size) for size in space.shape)
    if is_image_space_channels_first(space):
        return shape  # type: ignore[return-value]
    return (shape[2], shape[0], shape[1])


class VectorEncoder(FieldEncoder):
    """A Box of any shape that is not a large image (and MultiBinary): SB3's ``preprocess_obs``
    (as floats; a small uint8 image is scaled to [0, 1]) and ``FlattenExtractor``, then one
    ``Linear``-``Tanh`` layer.

    Args:
        space: the field's Box or MultiBinary space.
        output_size: features out.

    Shapes:
        - input: ``(N, *space.shape)``; output: ``(N, output_size)``
    """

    def __init__(self, space: spaces.Box | spaces.MultiBinary,
                 output_size: int = VECTOR_FEATURES) -> None:
        super().__init__()
        self.space = space
        self.flatten = FlattenExtractor(space)
        self.net = nn.Sequential(nn.Linear(self.flatten.features_dim, output_size), nn.Tanh())
        self.output_size = output_size

    def forward(self, observation: Tensor) -> Tensor:
        """Shapes: ``(N, *space.shape)`` -> ``(N, output_size)``."""
        return self.net(self.flatten(preprocess_obs(observation, self.space)))

    def extra_repr(self) -> str:
        return f"shape={tuple(self.space.shape)}"


class PixelEncoder(FieldEncoder):
    """A Box image (:func:`is_pixel_space`): scaled to [0, 1] by SB3's ``preprocess_obs``,
    channels moved first if they are last, then SB3's ``NatureCNN`` (Mnih et al., 2015).

    Args:
        space: the field's image space, channels first or last (SB3's heuristic decides).
        output_size: features out.

    Shapes:
        - input: ``(N, *space.shape)`` uint8; output: ``(N, output_size)``
    """

    def __init__(self, space: spaces.Box, output_size: int = PIXEL_FEATURES) -> None:
        super().__init__()
        self.space = space
        self.channels_last = not is_image_space_channels_first(space)
        chw = _channels_first_shape(space)
        self.cnn = NatureCNN(spaces.Box(0, 255, chw, np.uint8), features_dim=output_size)
        self.output_size = output_size

    def forward(self, observation: Tensor) -> Tensor:
        """Shapes: ``(N, *space.shape)`` -> ``(N, output_size)``."""
        pixels = preprocess_obs(observation, self.space)
        assert isinstance(pixels, Tensor)
        if self.channels_last:
            pixels = pixels.permute(0, 3, 1, 2)
        return self.cnn(pixels)

    def extra_repr(self) -> str:
        return f"shape={tuple(self.space.shape)}, channels_last={self.channels_last}"


class DiscreteEncoder(FieldEncoder):
    """Discrete and MultiDiscrete observations (any shape, flattened into components).

    - ``onehot``: one indicator per (component, value), by SB3's ``preprocess_obs``;
    - ``embedding``: each component's value picks a learned vector of
      :data:`DISCRETE_EMBEDDING_SIZE` features (one table, a block of rows per component),
      concatenated over the components.

    Values are shifted by the space's ``start`` first, so the first value is index 0.

    Args:
        space: the field's Discrete or MultiDiscrete space.
        encoding: one of :data:`DISCRETE_ENCODINGS`.

    Shapes:
        - input: ``(N,)`` (Discrete) or ``(N, *space.shape)`` (MultiDiscrete), integers
        - output: ``(N, sum(nvec))`` (onehot) or ``(N, components * 8)`` (embedding)
    """

    start: Tensor
    """Each component's first value (the space's ``start``)."""
    offsets: Tensor
    """Each component's first row in the ``embedding`` table."""

    def __init__(self, space: spaces.Discrete | spaces.MultiDiscrete,
                 encoding: str = "onehot") -> None:
        super().__init__()
        if encoding not in DISCRETE_ENCODINGS:
            raise ValueError(f"unknown discrete encoding {encoding!r}; use one of "
                             f"{', '.join(DISCRETE_ENCODINGS)}")
        if isinstance(space, spaces.Discrete):
            sizes, start = [int(space.n)], [int(space.start)]
        else:
            sizes = [int(n) for n in space.nvec.reshape(-1)]
            start = [int(s) for s in space.start.reshape(-1)]
        self.encoding = encoding
        self.sizes = sizes
        self.flat = spaces.MultiDiscrete(sizes)  # what SB3's one-hot preprocessing reads
        self.register_buffer("start", torch.tensor(start), persistent=False)
        self.register_buffer("offsets", torch.tensor(np.cumsum([0, *sizes[:-1]]).tolist()),
                             persistent=False)
        self.embedding: nn.Embedding | None = None
        if encoding == "embedding":
            self.embedding = nn.Embedding(sum(sizes), DISCRETE_EMBEDDING_SIZE)
            self.output_size = len(sizes) * DISCRETE_EMBEDDING_SIZE
        else:
            self.output_size = sum(sizes)

    def forward(self, observation: Tensor) -> Tensor:
        """Shapes: ``(N, *shape)`` -> ``(N, output_size)``."""
        values = observation.long().reshape(observation.shape[0], -1) - self.start
        if self.embedding is None:
            encoded = preprocess_obs(values, self.flat)
            assert isinstance(encoded, Tensor)
            return encoded
        return self.embedding(values + self.offsets).flatten(1)

    def extra_repr(self) -> str:
        return f"sizes={self.sizes}, encoding={self.encoding!r}"


"""``MiniGridExtractor``: rlmem's MiniGrid encoders as an SB3 features extractor."""

from __future__ import annotations

import torch
from gymnasium import spaces
from stable_baselines3.common.preprocessing import is_image_space_channels_first
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import Tensor

from rlmem.agents.minigrid_encoders import ImageEncoder, MissionEncoder


class MiniGridExtractor(BaseFeaturesExtractor):
    """The conv encoder of the 7×7×3 grid view, the compass heading when the observation has a
    ``direction``, and the mission encoder when it has a ``mission``, concatenated (the encoders
    of :mod:`rlmem.agents.minigrid_encoders`).

    Use it with ``normalize_images=False``: the image holds MiniGrid's object / colour / state
    indices, not pixels to divide by 255; ``grid_encoding`` says how they enter the conv net,
    exactly as in our PPO's model (:class:`~rlmem.agents.minigrid_encoders.ImageEncoder`).
    SB3 transposes image observations to channels-first (``VecTransposeImage``); both layouts
    are accepted.

    Unlike our PPO's model, where the mission joins after the memory, the whole feature vector
    goes through the memory cell here: that is where RecurrentPPO puts its LSTM.

    Args:
        observation_space: a ``Dict`` with ``image`` and optionally ``direction`` and
            ``mission`` (token ids), as made by :class:`rlmem.envs.MiniGridObservation`, or the
            image ``Box`` alone.
        mission_embedding: features per mission word.
        mission_size: features of the mission encoding.
        grid_encoding: ``embedding`` (default), ``onehot`` or ``raw``
            (:data:`rlmem.agents.minigrid_encoders.GRID_ENCODINGS`).

    Shapes:
        - image: ``(N, H, W, C)`` or ``(N, C, H, W)``
        - direction: ``(N, 1, 4)``, one-hot as SB3's ``preprocess_obs`` makes a Discrete
        - mission: ``(N, L)`` token ids (any dtype)
        - output: ``(N, features_dim)``
    """

    def __init__(self, observation_space: spaces.Space, mission_embedding: int = 32,
                 mission_size: int = 128, grid_encoding: str = "embedding") -> None:
        if isinstance(observation_space, spaces.Dict):
            if "image" not in observation_space.spaces:
                raise ValueError(f"MiniGridExtractor needs an 'image' observation, got keys "
                                 f"{list(observation_space.spaces)}")
            image_space = observation_space["image"]
            mission_space = observation_space.spaces.get("mission")
            direction_space = observation_space.spaces.get("direction")
            unknown = set(observation_space.spaces) - {"image", "direction", "mission"}
            if unknown:
                raise ValueError(f"MiniGridExtractor encodes image, direction and mission; the "
                                 f"observation also has {sorted(unknown)}")
        else:
            image_space, mission_space, direction_space = observation_space, None, None
        directions = 0
        if direction_space is not None:
            if not isinstance(direction_space, spaces.Discrete):
                raise ValueError(f"MiniGridExtractor needs the direction as a Discrete, got "
                                 f"{direction_space}")
            directions = int(direction_space.n)
        if not isinstance(image_space, spaces.Box) or len(image_space.shape) != 3:
            raise ValueError(f"MiniGridExtractor needs a (H, W, C) image Box, got {image_space}")
        channels_first = is_image_space_channels_first(image_space)
        shape = image_space.shape
        hwc = (shape[1], shape[2], shape[0]) if channels_first else shape
        image = ImageEncoder(hwc, grid_encoding)
        mission = None
        if mission_space is not None:
            if not isinstance(mission_space, spaces.Box):
                raise ValueError(f"MiniGridExtractor needs the mission as a Box of token ids, "
                                 f"got {mission_space}")
            mission = MissionEncoder(int(mission_space.high.max()) + 1, mission_embedding,
                                     mission_size)
        super().__init__(observation_space, image.output_size + directions
                         + (mission.output_size if mission else 0))
        self.channels_first = channels_first
        self.directions = directions
        self.image = image
        self.mission = mission

    def forward(self, observations: Tensor | dict[str, Tensor]) -> Tensor:
        """Shapes: see the class docstring."""
        image = observations["image"] if isinstance(observations, dict) else observations
        if self.channels_first:
            image = image.permute(0, 2, 3, 1)
        features = self.image(image)
        if self.directions:
            assert isinstance(observations, dict)  # a direction comes with a Dict space
            features = torch.cat([features, observations["direction"].flatten(1).float()], dim=1)
        if self.mission is not None:
            assert isinstance(observations, dict)  # a mission encoder comes with a Dict space
            features = torch.cat([features, self.mission(observations["mission"])], dim=1)
        return features

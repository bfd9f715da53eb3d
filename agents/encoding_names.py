"""The observation encodings a run chooses between, by name.

Torch-free, so that :class:`~rlmem.schema.train.TrainConfig` checks a run's
``grid_encoding`` and ``discrete_encoding`` without building a model; the encoders that implement
them are :class:`rlmem.agents.minigrid_encoders.ImageEncoder` and
:class:`rlmem.agents.ppo.space_encoders.DiscreteEncoder`.
"""

from __future__ import annotations

GRID_ENCODINGS = ("embedding", "onehot", "raw")
"""How MiniGrid's grid indices enter the conv net; see
:class:`~rlmem.agents.minigrid_encoders.ImageEncoder`."""

DISCRETE_ENCODINGS = ("onehot", "embedding")
"""How Discrete and MultiDiscrete observations enter the model; see
:class:`~rlmem.agents.ppo.space_encoders.DiscreteEncoder`."""

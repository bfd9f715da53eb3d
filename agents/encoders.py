"""Encoders of MiniGrid observations, shared by our PPO model and the sb3-contrib policy.

Both follow ``rl-starter-files`` (Willems, 2020), the MiniGrid recipe the ReLSTM paper builds on:
a three-layer conv net on the 7×7×3 egocentric grid encoding, and a word embedding plus GRU on
the mission's token ids.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rlmem.envs.encoding import PAD


class ImageEncoder(nn.Module):
    """Conv(2×2,16)-ReLU-MaxPool(2×2)-Conv(2×2,32)-ReLU-Conv(2×2,64)-ReLU, flattened.

    The grid encoding (object, colour, state indices) goes in as floats, unnormalised, as in
    rl-starter-files.

    Args:
        image_shape: ``(height, width, channels)`` of one observation, e.g. ``(7, 7, 3)``.

    Shapes:
        - input: ``(N, height, width, channels)``, any numeric dtype
        - output: ``(N, output_size)``; 64 for a 7×7 view
    """

    def __init__(self, image_shape: tuple[int, int, int]) -> None:
        super().__init__()
        height, width, channels = image_shape
        if min(height, width) < 7:
            raise ValueError(f"ImageEncoder needs a view of at least 7x7, got {height}x{width}")
        self.image_shape = tuple(image_shape)
        self.net = nn.Sequential(
            nn.Conv2d(channels, 16, (2, 2)), nn.ReLU(), nn.MaxPool2d((2, 2)),
            nn.Conv2d(16, 32, (2, 2)), nn.ReLU(),
            nn.Conv2d(32, 64, (2, 2)), nn.ReLU(),
            nn.Flatten())
        self.output_size = ((height - 1) // 2 - 2) * ((width - 1) // 2 - 2) * 64

    def forward(self, image: Tensor) -> Tensor:
        """Shapes: ``(N, H, W, C)`` -> ``(N, output_size)``."""
        return self.net(image.permute(0, 3, 1, 2).float())


class MissionEncoder(nn.Module):
    """Word embedding, then a GRU over the tokens; the output is the GRU state after the last
    non-padding token.

    Args:
        vocabulary_size: number of token ids (:data:`rlmem.envs.VOCABULARY`).
        embedding_size: features per word.
        output_size: features of the GRU state, the mission's encoding.

    Shapes:
        - input: ``(N, L)`` int64 token ids, padded at the end with :data:`rlmem.envs.encoding.PAD`
        - output: ``(N, output_size)``
    """

    def __init__(self, vocabulary_size: int, embedding_size: int = 32,
                 output_size: int = 128) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocabulary_size, embedding_size, padding_idx=PAD)
        self.gru = nn.GRU(embedding_size, output_size, batch_first=True)
        self.output_size = output_size

    def forward(self, tokens: Tensor) -> Tensor:
        """Shapes: ``(N, L)`` -> ``(N, output_size)``."""
        tokens = tokens.long()
        lengths = (tokens != PAD).sum(dim=1)
        # Run only as far as the longest mission in the batch; padding after it is dead weight.
        steps = max(int(lengths.max()), 1)
        outputs, _ = self.gru(self.embedding(tokens[:, :steps]))
        last = (lengths - 1).clamp(min=0)
        return outputs[torch.arange(tokens.shape[0], device=tokens.device), last]

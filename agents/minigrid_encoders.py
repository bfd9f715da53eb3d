"""The contract of an observation field's encoder (:class:`FieldEncoder`), and the encoders of
MiniGrid observations, shared by our PPO model and the sb3-contrib policy (the encoders of other
envs' fields are in :mod:`rlmem.agents.ppo.space_encoders`).

Both follow ``rl-starter-files`` (Willems, 2020), the MiniGrid recipe the ReLSTM paper builds on:
a three-layer conv net on the 7×7×3 egocentric grid encoding, and a word embedding plus GRU on
the mission's token ids. One measured departure: the grid's indices are embedded by default
instead of fed as raw floats (``raw`` stays selectable for parity with the paper).
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX
from torch import Tensor, nn

from rlmem.agents.encoding_names import GRID_ENCODINGS
from rlmem.agents.grid_fold import folded_first_block, last_convolution, window_convolution
from rlmem.envs.minigrid_observation import PAD

GRID_VOCABULARY = (len(OBJECT_TO_IDX), len(COLOR_TO_IDX), len(STATE_TO_IDX))
"""How many values each channel of MiniGrid's grid encoding takes: objects, colours, states."""

EMBEDDING_SIZE = 8
"""Features per channel of the ``embedding`` grid encoding (so 24 conv input channels)."""

FULL_VIEW = 7
"""MiniGrid's default ``agent_view_size``, the smallest view the conv net takes whole: smaller
views are placed in one this size (:class:`ImageEncoder`)."""


class _CPUEmbeddingLookup(torch.autograd.Function):
    """``weight[indices]`` whose backward accumulates with ``index_put_`` rather than
    ``embedding_dense_backward``: on the CPU on one thread both add the gradient's rows into
    the table one index after another, in the indices' order, so the sums are the same bit for
    bit (on several threads torch's splits the indices among them, and rounds otherwise), and
    ``index_put_`` is several times faster on the 37,632 indices (256 views × 49 cells × 3
    channels) of a PPO minibatch, where the dense backward was a tenth of an update."""

    @staticmethod
    def forward(ctx: Any, indices: Tensor, weight: Tensor) -> Tensor:
        # ctx here, not in a setup_context, which would bind every call's arguments through
        # inspect.signature (see agents/grid_fold.py's _GridFold)
        ctx.save_for_backward(indices)
        ctx.table_shape = weight.shape
        return nn.functional.embedding(indices, weight)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[None, Tensor]:
        (indices,) = ctx.saved_tensors
        rows, size = ctx.table_shape
        table = grad.new_zeros(rows, size)
        table.index_put_((indices.reshape(-1),), grad.reshape(-1, size), accumulate=True)
        return None, table


def embedding_lookup(indices: Tensor, weight: Tensor) -> Tensor:
    """``nn.functional.embedding(indices, weight)``, with the faster, identical backward of
    :class:`_CPUEmbeddingLookup` on the CPU (on a GPU, torch's own: ``index_put_`` accumulates
    there in no fixed order)."""
    if weight.device.type == "cpu" and weight.requires_grad and torch.is_grad_enabled():
        result: Tensor = _CPUEmbeddingLookup.apply(indices, weight)
        return result
    return nn.functional.embedding(indices, weight)


class FieldEncoder(nn.Module):
    """The encoder of one observation field: a flat batch ``(N, *field shape)`` to
    ``(N, output_size)`` features.

    Shapes:
        - input: ``(N, *field shape)``; output: ``(N, output_size)``
    """

    output_size: int
    """Features per observation."""

    after_memory: ClassVar[bool] = False
    """Whether the features join the memory's output (True: for what is visible at every step)
    instead of entering the memory (False)."""


class ImageEncoder(FieldEncoder):
    """The grid's indices made into features, then
    Conv(2×2,16)-ReLU-MaxPool(2×2)-Conv(2×2,32)-ReLU-Conv(2×2,64)-ReLU, flattened.

    MiniGrid's grid encoding holds an object, a colour and a state *index* per cell. How they
    enter the conv net is the ``encoding``:

    - ``embedding`` (default): each channel's index picks a learned vector of
      :data:`EMBEDDING_SIZE` features (one table per channel, as BabyAI embeds each index),
      concatenated over the three channels;
    - ``onehot``: one indicator per (channel, value), 11 + 6 + 3 = 20 channels;
    - ``raw``: the indices as floats, unnormalised: rl-starter-files' recipe, which the ReLSTM
      paper uses. Key (5) and ball (6) then differ by 1 in one input: on MiniGrid MemoryS7 the
      conv features of the two cues ended up nearly equal and no memory learned the task.

    A view smaller than 7×7 (MiniGrid's ``agent_view_size`` 3 or 5) is placed in a 7×7 one as
    MiniGrid places the agent, at the middle of the last row, and the cells around it hold
    index 0 in every channel: MiniGrid's encoding of an unseen cell. Each cell the small view
    shows is where a 7×7 view shows it, so the conv stack and its output size stay those of the
    default view.

    Args:
        image_shape: ``(height, width, channels)`` of one observation, e.g. ``(7, 7, 3)``.
            MiniGrid's first axis is the view's x (across the agent), its second the y (the
            agent looks towards y = 0); views are square and odd-sized.
        encoding: one of :data:`GRID_ENCODINGS`.
        folded: compute the embedding, the first convolution, its ReLU and the max-pool as
            one table lookup on the CPU, the second convolution and its ReLU as one matrix
            product over its input's windows, and the last convolution as one matrix product
            (:mod:`rlmem.agents.grid_fold`): the same function, rounded in another order, a
            PPO update 1.1-1.4× as fast; the ``embedding`` encoding only. Elsewhere (a GPU,
            no compiled loops) the modules run as without it. The weights are the same.

    Shapes:
        - input: ``(N, height, width, channels)``, any numeric dtype holding the indices
        - output: ``(N, output_size)``; 64 for a view of at most 7×7
    """

    after_memory: ClassVar[bool] = False
    """The grid feeds the memory."""

    offsets: Tensor
    """Per channel, the first row of its values in the one table (not the ``raw`` encoding)."""
    indicators: Tensor
    """The identity over the table's rows (the ``onehot`` encoding only)."""
    channel_of_row: Tensor
    """Which channel each row of the one table belongs to (the ``embedding`` encoding only)."""

    def __init__(self, image_shape: tuple[int, int, int], encoding: str = "embedding",
                 folded: bool = False) -> None:
        super().__init__()
        height, width, channels = image_shape
        if min(height, width) < FULL_VIEW and (height != width or height % 2 == 0):
            raise ValueError(f"ImageEncoder takes views smaller than {FULL_VIEW}x{FULL_VIEW} "
                             f"only as MiniGrid makes them, square and odd-sized; got "
                             f"{height}x{width}")
        if encoding not in GRID_ENCODINGS:
            raise ValueError(f"unknown grid encoding {encoding!r}; use one of "
                             f"{', '.join(GRID_ENCODINGS)}")
        if encoding != "raw" and channels != len(GRID_VOCABULARY):
            raise ValueError(f"grid encoding {encoding!r} needs MiniGrid's (object, colour, "
                             f"state) channels, got {channels} channels; use encoding='raw'")
        if folded and encoding != "embedding":
            raise ValueError(f"a folded grid encoder needs the 'embedding' encoding, got "
                             f"{encoding!r}")
        self.image_shape = tuple(image_shape)
        self.encoding = encoding
        self.folded = folded
        # F.pad's order: channels, then y (all of it in front of the agent), then x (both sides).
        side, ahead = (FULL_VIEW - height) // 2, FULL_VIEW - width
        self.padding: tuple[int, ...] | None = (
            (0, 0, ahead, 0, side, side) if height < FULL_VIEW else None)
        height, width = max(height, FULL_VIEW), max(width, FULL_VIEW)
        self.embedding: nn.Embedding | None = None
        in_channels = channels
        if encoding != "raw":
            # One table for the three channels: channel c's value v is row offset[c] + v.
            self.register_buffer("offsets", torch.tensor(
                [sum(GRID_VOCABULARY[:c]) for c in range(channels)]), persistent=False)
            rows = sum(GRID_VOCABULARY)
            if encoding == "onehot":
                self.register_buffer("indicators", torch.eye(rows), persistent=False)
                in_channels = rows
            else:
                self.embedding = nn.Embedding(rows, EMBEDDING_SIZE)
                in_channels = channels * EMBEDDING_SIZE
                self.register_buffer("channel_of_row", torch.tensor(
                    [c for c, values in enumerate(GRID_VOCABULARY) for _ in range(values)]),
                    persistent=False)
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 16, (2, 2)), nn.ReLU(), nn.MaxPool2d((2, 2)),
            nn.Conv2d(16, 32, (2, 2)), nn.ReLU(),
            nn.Conv2d(32, 64, (2, 2)), nn.ReLU(),
            nn.Flatten())
        self.output_size = ((height - 1) // 2 - 2) * ((width - 1) // 2 - 2) * 64

    def grid_features(self, image: Tensor) -> Tensor:
        """The per-cell features that enter the conv net, the view made 7×7 if smaller.

        Shapes: ``(N, H, W, C)`` -> ``(N, features, max(H, 7), max(W, 7))``.
        """
        if self.encoding == "raw":
            return self._full_view(image).permute(0, 3, 1, 2).float()
        rows = self.table_rows(image)
        if self.embedding is None:  # one-hot: the three indicators of a cell, summed
            features = self.indicators[rows].sum(dim=-2)
        else:
            features = embedding_lookup(rows, self.embedding.weight).flatten(-2)
        return features.permute(0, 3, 1, 2)

    def table_rows(self, image: Tensor) -> Tensor:
        """Each cell's rows of the one table (not the ``raw`` encoding), the view made 7×7.

        Shapes: ``(N, H, W, C)`` -> ``(N, max(H, 7), max(W, 7), C)`` int64.
        """
        return self._full_view(image).long() + self.offsets

    def _full_view(self, image: Tensor) -> Tensor:
        """``image`` placed in a 7×7 view where it is smaller (the class docstring)."""
        if self.padding is None:
            return image
        return nn.functional.pad(image, self.padding)  # 0: MiniGrid's "unseen"

    def forward(self, image: Tensor) -> Tensor:
        """Shapes: ``(N, H, W, C)`` -> ``(N, output_size)``."""
        if self.folded:
            assert self.embedding is not None  # __init__: folded needs the embedding
            pooled = folded_first_block(self.table_rows(image), self.embedding,
                                        self.convolution(0), self.channel_of_row, owner=self)
            if pooled is not None:  # net[:3]: the convolution, its ReLU and the max-pool
                second = window_convolution(pooled, self.convolution(3))  # net[3:5]
                assert second is not None  # the compiled loops ran the first block
                last = self.convolution(5)
                if second.shape[1:3] == last.kernel_size:  # net[5:]: one product
                    return last_convolution(second, last).relu()
                return self.net[5:](second.permute(0, 3, 1, 2))
        return self.net(self.grid_features(image))

    def convolution(self, index: int) -> nn.Conv2d:
        """The convolution at ``net[index]`` (0, 3 or 5)."""
        layer = self.net[index]
        assert isinstance(layer, nn.Conv2d)
        return layer

    def extra_repr(self) -> str:
        shown = f"image_shape={self.image_shape}, encoding={self.encoding!r}"
        shown += ", folded" if self.folded else ""
        return shown + (f", placed in a {FULL_VIEW}x{FULL_VIEW} view" if self.padding else "")


class MissionEncoder(FieldEncoder):
    """Word embedding, then a GRU over the tokens; the output is the GRU state after the last
    non-padding token.

    Args:
        vocabulary_size: number of token ids (:data:`rlmem.envs.VOCABULARY`).
        embedding_size: features per word.
        output_size: features of the GRU state, the mission's encoding.

    Shapes:
        - input: ``(N, L)`` int64 token ids, padded at the end with
          :data:`rlmem.envs.minigrid_observation.PAD`
        - output: ``(N, output_size)``
    """

    after_memory: ClassVar[bool] = True
    """The mission joins the memory's output: it is visible at every step, so there is nothing
    to remember about it (rl-starter-files)."""

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

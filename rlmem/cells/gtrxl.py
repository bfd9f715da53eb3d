r"""GTrXL: the gated Transformer-XL (Parisotto et al., 2020) over a sliding window.

Reference: E. Parisotto, H. F. Song, J. W. Rae, R. Pascanu, C. Gulcehre, S. M. Jayakumar,
M. Jaderberg, R. Lopez Kaufman, A. Clark, S. Noury, M. M. Botvinick, N. Heess, R. Hadsell.
"Stabilizing Transformers for Reinforcement Learning", ICML 2020 (the gated layer and its
gating variants); its attention is Transformer-XL's (Z. Dai et al., ACL 2019, §3.3).
"""

from __future__ import annotations

import math
from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells._engines.onednn_linear import Linear, linear
from rlmem.cells._engines.windowed_attention import (
    folded_relative_attention,
    folds_keys,
    last_reset,
    query_block,
    relative_attention,
    slide_window,
    window_mask,
)
from rlmem.cells.base import Cell, Dims, ScanResult
from rlmem.cells.registry import register


class GTrXLState(NamedTuple):
    memory: Annotated[Tensor, Dims("layers", "window", "hidden_size")]
    r"""The input :math:`E^{(l-1)}` of every layer at each of the last ``window`` steps of the
    episode, oldest first, ``(B, layers, window, hidden_size)``; empty slots are zero."""
    valid: Annotated[Tensor, Dims("window", dtype=torch.bool)]
    """Which slots hold a step of the current episode, ``(B, window)`` bool."""


def sinusoid(distances: int, size: int, like: Tensor) -> Tensor:
    r"""Transformer-XL's relative position encoding :math:`R_\delta`, δ = 0 … ``distances`` − 1:
    :math:`[\sin(\delta f_i), \cos(\delta f_i)]`, :math:`f_i = 10000^{-2i/size}`.

    Shapes:
        - returns ``(distances, size)``, ``like``'s dtype and device
    """
    half = (size + 1) // 2
    frequency = torch.exp(torch.arange(half, dtype=like.dtype, device=like.device)
                          * (-2 * math.log(10000.0) / size))
    angle = torch.arange(distances, dtype=like.dtype, device=like.device).unsqueeze(1) * frequency
    return torch.cat([angle.sin(), angle.cos()], dim=1)[:, :size]


class GRUGate(nn.Module):
    r"""GTrXL's GRU-type gating layer :math:`g(x, y)`, in place of a residual
    :math:`x + y`:

    .. math::
        r &= \sigma(W_r y + U_r x) \qquad z = \sigma(W_z y + U_z x - b_g) \\
        \hat h &= \tanh(W_g y + U_g (r \odot x)) \qquad g(x, y) = (1 - z) \odot x + z \odot \hat h
    """

    def __init__(self, size: int, gate_bias: float) -> None:
        super().__init__()
        self.gate_bias = gate_bias
        self.W = Linear(size, 3 * size, bias=False)  # [W_r; W_z; W_g]
        self.U = Linear(size, 2 * size, bias=False)  # [U_r; U_z]
        self.U_g = Linear(size, size, bias=False)

    def forward(self, x: Tensor, y: Tensor) -> Tensor:
        w_r, w_z, w_g = self.W(y).chunk(3, -1)
        u_r, u_z = self.U(x).chunk(2, -1)
        r = torch.sigmoid(w_r + u_r)
        z = torch.sigmoid(w_z + u_z - self.gate_bias)
        candidate = torch.tanh(w_g + self.U_g(r * x))
        return torch.lerp(x, candidate, z)


class GatedLayer(nn.Module):
    r"""One GTrXL layer, identity-map reordered (LayerNorm on each submodule's input) and
    gated (with :class:`GRUGate`):

    .. math::
        Y &= \mathrm{RelMHA}(\mathrm{LN}([M^{(l-1)}, E^{(l-1)}])) \qquad
        E' = g(E^{(l-1)}, \mathrm{ReLU}(Y)) \\
        \bar E &= \mathrm{MLP}(\mathrm{LN}(E')) \qquad E^{(l)} = g(E', \mathrm{ReLU}(\bar E))
    """

    def __init__(self, size: int, heads: int, mlp_size: int, gate_bias: float) -> None:
        super().__init__()
        self.heads, self.head_size = heads, -(-size // heads)
        width = heads * self.head_size
        self.norm_attention = nn.LayerNorm(size)
        self.qkv = Linear(size, 3 * width, bias=False)
        self.position = Linear(size, width, bias=False)  # W_{k,R}
        self.u = nn.Parameter(torch.zeros(heads, self.head_size))
        self.w = nn.Parameter(torch.zeros(heads, self.head_size))
        self.out = Linear(width, size, bias=False)
        self.gate_attention = GRUGate(size, gate_bias)
        self.norm_mlp = nn.LayerNorm(size)
        self.mlp = nn.Sequential(Linear(size, mlp_size), nn.ReLU(), Linear(mlp_size, size))
        self.gate_mlp = GRUGate(size, gate_bias)

    def forward(self, e: Tensor, context: Tensor, allowed: Tensor) -> Tensor:
        """The layer's output at the queries ``e``, attending over ``context`` (the window's
        slots, then ``e``) where ``allowed``.

        Shapes:
            - e: ``(B, T, D)``; context: ``(B, M + T, D)``; allowed: ``(B, T, M + T)``
            - returns ``(B, T, D)``
        """
        batch, steps, size = e.shape
        split = (self.heads, self.head_size)
        width = self.heads * self.head_size
        normed = self.norm_attention(context)
        q = linear(normed[:, -steps:], self.qkv.weight[:width]).view(
            batch, steps, *split)
        r = self.position(sinusoid(context.shape[1] - steps + 1, size, e)).view(-1, *split)
        if folds_keys(steps, context.shape[1], size, self.heads):
            key_weight, value_weight = self.qkv.weight[width:].view(2, *split, size).unbind()
            attended = folded_relative_attention(q, normed, key_weight, value_weight, r,
                                                 self.u, self.w, allowed)
        else:
            k, v = linear(normed, self.qkv.weight[width:]).chunk(2, -1)
            attended = relative_attention(q, k.view(batch, -1, *split),
                                          v.view(batch, -1, *split), r, self.u, self.w, allowed)
        e = self.gate_attention(e, functional.relu(self.out(attended.flatten(2))))
        return self.gate_mlp(e, functional.relu(self.mlp(self.norm_mlp(e))))


@register("gtrxl")
class GTrXL(Cell):
    r"""Gated Transformer-XL (Parisotto et al., 2020) over a sliding window of the episode.

    The input is embedded, :math:`E^{(0)}_t = W_e x_t + b_e`, and passes ``layers`` gated
    layers (:class:`GatedLayer`); layer :math:`l` attends from :math:`E^{(l-1)}_t` over the
    inputs it had at the last ``window`` steps of the episode, :math:`M^{(l-1)}_t`, and over
    :math:`E^{(l-1)}_t` itself, with Transformer-XL's relative positions
    (:func:`~rlmem.cells._engines.windowed_attention.relative_attention`). The output is
    :math:`y_t = E^{(L)}_t`. The state holds :math:`M^{(l-1)}` for every layer as ``window``
    slots with a validity mask (a reset empties them), and one step is::

        for l in range(layers):
            context = [memory[l], e]                # window slots, oldest first, then e_t
            e_next = layer_l(e, context, [valid, 1])
            memory[l] = [memory[l][1:], e]          # e_t enters, the oldest leaves
            e = e_next
        valid = [valid[1:], 1]

    The reference loop is :func:`~rlmem.cells.base.scan` over :meth:`step`; a chunk runs every
    layer once over all its steps, each query attending over the window and the chunk through
    one mask (:mod:`~rlmem.cells._engines.windowed_attention`). Where few queries attend over
    many keys (the acting step: one query over the window), each layer folds its key and
    value maps into the query and the read instead of projecting every slot
    (:func:`~rlmem.cells._engines.windowed_attention.folded_relative_attention`; the choice,
    by multiplications, is :func:`~rlmem.cells._engines.windowed_attention.folds_keys`).

    Initialisation: the gates' :math:`b_g` = ``gate_bias`` (the paper's 2: each layer starts
    near the identity, so the agent starts as a Markovian policy), :math:`u, w` zero, the
    linear maps torch's default.

    Departures and sizes: Transformer-XL's memory is the previous *segment* of each layer's
    inputs, with the gradient stopped; here it is a window sliding by one step, as the cell
    contract's one-step rollout needs, and inside a chunk gradients flow through it (across
    chunks the trainer detaches the state, as for every cell). So every layer sees the last
    ``window`` steps, and the output depends on up to ``layers · window`` of them. The paper's
    agents are much larger (deeper stacks, memories of hundreds of steps); the defaults here
    are sized for the 64-unit agents of this library's RL presets.

    Args:
        input_size: features of each input.
        hidden_size: D, the width of the embedding and of every layer; the output size.
        layers: L, the number of gated layers.
        heads: attention heads per layer, each of :math:`\lceil D / \text{heads} \rceil`
            features (the output map takes them back to D).
        window: M, the past steps each layer attends over.
        mlp_size: the hidden width of each layer's MLP (None: ``4 · hidden_size``).
        gate_bias: :math:`b_g`, the bias that starts every gate near the identity.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`GTrXLState`,
          ``(B, layers, window, hidden_size)`` and ``(B, window)`` bool
    """

    state_type = GTrXLState

    def __init__(self, input_size: int, hidden_size: int, *, layers: int = 2, heads: int = 4,
                 window: int = 32, mlp_size: int | None = None,
                 gate_bias: float = 2.0) -> None:
        super().__init__(input_size, hidden_size)
        for name, value in (("layers", layers), ("heads", heads), ("window", window)):
            if value <= 0:
                raise ValueError(f"GTrXL: {name} must be positive, got {value}")
        self.layers, self.heads, self.window = layers, heads, window
        self.mlp_size = mlp_size if mlp_size is not None else 4 * hidden_size
        self.gate_bias = gate_bias
        self.embed = Linear(input_size, hidden_size)
        self.blocks = nn.ModuleList(GatedLayer(hidden_size, heads, self.mlp_size, gate_bias)
                                    for _ in range(layers))

    def project_input(self, x: Tensor) -> Tensor:
        """:math:`E^{(0)} = W_e x + b_e` for every step.

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, hidden_size)``
        """
        return self.embed(x)

    def step(self, x_t: Tensor, state: GTrXLState
             ) -> tuple[Tensor, GTrXLState, dict[str, Tensor]]:
        """One step from ``x_t`` = :math:`E^{(0)}_t`: the loop of the class docstring."""
        e = x_t.unsqueeze(1)
        allowed = torch.cat([state.valid, torch.ones_like(state.valid[:, :1])], 1).unsqueeze(1)
        memory = []
        for index, block in enumerate(self.blocks):
            slots = state.memory[:, index]
            memory.append(torch.cat([slots[:, 1:], e], 1))
            e = block(e, torch.cat([slots, e], 1), allowed)
        valid = torch.cat([state.valid[:, 1:], torch.ones_like(state.valid[:, :1])], 1)
        return e.squeeze(1), GTrXLState(torch.stack(memory, 1), valid), {}

    def fast_scan(self, x: Tensor, state: GTrXLState, resets: Tensor) -> ScanResult:
        """Every layer once over the chunk, in blocks of
        :func:`~rlmem.cells._engines.windowed_attention.query_block` queries, each through its
        mask (:func:`~rlmem.cells._engines.windowed_attention.window_mask`)."""
        e = self.project_input(x).transpose(0, 1)
        start = last_reset(resets)
        queries = query_block(self.window, x.device)
        bounds = [(begin, min(begin + queries, x.shape[0]))
                  for begin in range(0, x.shape[0], queries)]
        masks = [window_mask(state.valid, start, begin, end) for begin, end in bounds]
        inputs = []
        for index, block in enumerate(self.blocks):
            inputs.append(e)
            context = torch.cat([state.memory[:, index], e], 1)
            e = torch.cat([block(e[:, begin:end], context[:, begin:self.window + end], mask)
                           for (begin, end), mask in zip(bounds, masks, strict=True)], 1)
        memory, valid = slide_window(state.memory, torch.stack(inputs, 1), state.valid, resets)
        return ScanResult(e.transpose(0, 1), GTrXLState(memory, valid), {})

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, layers={self.layers}, heads={self.heads}, "
                f"window={self.window}, mlp_size={self.mlp_size}, gate_bias={self.gate_bias}")

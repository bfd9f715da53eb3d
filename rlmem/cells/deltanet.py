r"""DeltaNet: linear attention with the delta rule (Schlag et al., 2021; Yang et al., 2024).

References: I. Schlag, K. Irie, J. Schmidhuber. "Linear Transformers Are Secretly Fast Weight
Programmers", ICML 2021 (the delta rule update). S. Yang, B. Wang, Y. Zhang, Y. Shen, Y. Kim.
"Parallelizing Linear Transformers with the Delta Rule over Sequence Length", NeurIPS 2024
(DeltaNet and its chunkwise form).
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional

from rlmem.cells._engines.delta_rule import compiled_scan, delta_rule_scan
from rlmem.cells._engines.onednn_linear import Linear, linear
from rlmem.cells._engines.short_convolution import convolve_chunk, convolve_step
from rlmem.cells.base import Cell, Dims, ScanResult
from rlmem.cells.registry import register


class DeltaNetState(NamedTuple):
    S: Annotated[Tensor, Dims("heads", "head_size", "head_size")]
    r"""The fast weights :math:`S_{t-1}` of every head, ``(B, heads, d_v, d_k)``."""
    window: Annotated[Tensor, Dims("conv_size", 3, "heads", "head_size")]
    r"""The projections :math:`W_q x, W_k x, W_v x` of the episode's last ``conv_size`` steps,
    oldest first (zeros before its start), which the short convolution reads,
    ``(B, conv_size, 3, heads, head_size)``."""


@register("deltanet")
class DeltaNet(Cell):
    r"""Linear attention with the delta rule (DeltaNet), one layer of ``heads`` heads.

    Per head, a fast-weight matrix :math:`S` that each step corrects towards mapping the key
    :math:`k_t` to the value :math:`v_t`, by the fraction :math:`\beta_t` (the delta rule), and
    that the query reads:

    .. math::
        \tilde q_t &= \phi(\mathrm{conv}_q(W_q x)_t) \qquad
        \tilde k_t = \phi(\mathrm{conv}_k(W_k x)_t) \qquad
        v_t = \phi(\mathrm{conv}_v(W_v x)_t) \\
        q_t &= \tilde q_t / \lVert \tilde q_t \rVert \qquad
        k_t = \tilde k_t / \lVert \tilde k_t \rVert \qquad
        \beta_t = \sigma(W_\beta x_t + b_\beta) \\
        S_t &= S_{t-1} + \beta_t (v_t - S_{t-1} k_t) k_t^\top
             = S_{t-1} (I - \beta_t k_t k_t^\top) + \beta_t v_t k_t^\top \\
        o_t &= S_t q_t \qquad y_t = W_o [o_t^{(1)}; \dots; o_t^{(h)}] + b_o

    with :math:`\phi` = SiLU, the norms per head, and :math:`\mathrm{conv}` a causal
    depthwise convolution over the last ``conv_size`` steps of the episode, one filter per
    channel (:mod:`~rlmem.cells._engines.short_convolution`). The reference loop is
    :func:`~rlmem.cells.base.scan` over :meth:`step` (the delta rule as first written); a
    chunk runs on the CPU as that recurrence compiled, with a backward written out, and
    elsewhere in blocks through the chunkwise (WY) form of Yang et al. (2024), one triangular
    solve per block, which the second form (linear in :math:`S`) allows
    (:mod:`~rlmem.cells._engines.delta_rule`).

    Which paper: the update is Schlag et al.'s delta rule with one learned
    :math:`\beta_t` per head; the layer around it is Yang et al.'s DeltaNet: the short
    convolution (kernel 4, no bias, SiLU after it, on queries, keys and values alike), then
    :math:`L_2`-normalised queries and keys, which keeps
    :math:`\lVert I - \beta k k^\top \rVert \le 1` (Schlag et al. use DPFP features with
    sum normalisation). The convolution is what lets the keys tell steps apart by their
    recent past: without it a query finds only what was written under its own input, and a
    task such as recalling the input of four steps ago cannot be learnt. Ungated, as both (a
    decay gate is Gated DeltaNet, Yang et al., 2025). Departures: no output normalisation
    (Yang et al.'s full layer has an RMSNorm before :math:`W_o`), and :math:`\beta`'s
    projection has a bias. Initialisation: the maps torch's default, the convolution's
    filters as :class:`torch.nn.Conv1d`'s (uniform on :math:`\pm 1/\sqrt{\text{conv\_size}}`).

    Args:
        input_size: features of each input.
        hidden_size: features of the output :math:`y_t`.
        heads: h, the number of heads.
        head_size: :math:`d_k = d_v`, features per head (None: :math:`\lceil` hidden_size
            / heads :math:`\rceil`); :math:`W_o` maps the heads' ``heads · head_size``
            features to ``hidden_size``.
        conv_size: the short convolution's width, in steps (1: each channel scaled, no
            reach into the past).

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`DeltaNetState`,
          ``(B, heads, head_size, head_size)`` and ``(B, conv_size, 3, heads, head_size)``
    """

    state_type = DeltaNetState

    def __init__(self, input_size: int, hidden_size: int, *, heads: int = 4,
                 head_size: int | None = None, conv_size: int = 4) -> None:
        super().__init__(input_size, hidden_size)
        if heads <= 0 or (head_size is not None and head_size <= 0) or conv_size <= 0:
            raise ValueError(f"DeltaNet: heads, head_size and conv_size must be positive, got "
                             f"{heads}, {head_size}, {conv_size}")
        self.heads, self.conv_size = heads, conv_size
        self.head_size = head_size if head_size is not None else -(-hidden_size // heads)
        width = heads * self.head_size
        self.qkv = Linear(input_size, 3 * width, bias=False)
        self.conv = nn.Parameter(torch.empty(3 * width, conv_size))
        """The short convolution's filters, one per channel of ``[W_q x, W_k x, W_v x]``,
        oldest tap first (:class:`torch.nn.Conv1d`'s order)."""
        self.beta = Linear(input_size, heads)
        self.out = Linear(width, hidden_size)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""The maps torch's default; the filters :class:`torch.nn.Conv1d`'s, uniform on
        :math:`\pm 1/\sqrt{\text{conv\_size}}` (its fan-in, one input channel per filter)."""
        for projection in (self.qkv, self.beta, self.out):
            projection.reset_parameters()
        bound = self.conv_size ** -0.5
        nn.init.uniform_(self.conv, -bound, bound)

    def project_input(self, x: Tensor) -> Tensor:
        r"""Every step's :math:`[W_q x_t, W_k x_t, W_v x_t, W_\beta x_t + b_\beta]`, one
        matmul (the convolution, the feature map, the norms and σ come after).

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, 3 heads d + heads)``
        """
        weight = torch.cat([self.qkv.weight, self.beta.weight])
        bias = torch.cat([self.beta.bias.new_zeros(self.qkv.out_features), self.beta.bias])
        return linear(x, weight, bias)

    def _convolved(self, features: Tensor, window: Tensor,
                   resets: Tensor | None) -> tuple[Tensor, Tensor]:
        """:meth:`project_input`'s features with :math:`W_q x, W_k x, W_v x` convolved, and the
        window after them: one step (``features`` ``(B, F)``, ``resets`` None: the state is
        already reset) or a chunk (``(T, B, F)``).

        Shapes:
            - window: ``(B, conv_size, 3 heads head_size)``; returns the features' shape and
              the window's
        """
        projected, beta = features.split([window.shape[2], self.heads], -1)
        if resets is None:
            convolved, window = convolve_step(projected, window, self.conv)
        else:
            convolved, window = convolve_chunk(projected, window, self.conv, resets)
        return torch.cat([convolved, beta], -1), window

    def _split(self, features: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:meth:`_convolved`'s features as q, k, v ``(*, heads, d)`` and β ``(*, heads, 1)``:
        the feature map, which the compiled chunk (``csrc/delta_rule.h``) applies inside its
        loop, proved equal in the tests."""
        width = self.heads * self.head_size
        q, k, v, beta = features.split([width, width, width, self.heads], -1)
        q, k, v = (functional.silu(part.unflatten(-1, (self.heads, self.head_size)))
                   for part in (q, k, v))
        q, k = (functional.normalize(part, dim=-1) for part in (q, k))
        return q, k, v, torch.sigmoid(beta).unsqueeze(-1)

    def step(self, x_t: Tensor, state: DeltaNetState
             ) -> tuple[Tensor, DeltaNetState, dict[str, Tensor]]:
        r"""The convolution over the window, then
        :math:`S_t = S_{t-1} + \beta_t (v_t - S_{t-1} k_t) k_t^\top` and the readout."""
        features, window = self._convolved(x_t, state.window.flatten(2), None)
        _, k, v, beta = self._split(features)
        error = v - (state.S @ k.unsqueeze(-1)).squeeze(-1)
        S = state.S + (beta * error).unsqueeze(-1) * k.unsqueeze(-2)
        return self.readout(features, S), DeltaNetState(S, window.view_as(state.window)), {}

    def readout(self, features: Tensor, s: Tensor) -> Tensor:
        r""":math:`y_t = W_o [S_t q_t]_{heads} + b_o`."""
        q = self._split(features)[0]
        return self.out((s @ q.unsqueeze(-1)).flatten(-3))

    def fast_scan(self, x: Tensor, state: DeltaNetState, resets: Tensor) -> ScanResult:
        """The chunk step by step, compiled, on the CPU
        (:func:`~rlmem.cells._engines.delta_rule.compiled_scan`); else through the chunkwise
        form (:func:`~rlmem.cells._engines.delta_rule.delta_rule_scan`)."""
        # In the state's precision: bf16 autocast gives bf16 features, and no bf16 solve.
        features = self.project_input(x).to(state.S.dtype)
        window = state.window.flatten(2)
        result = compiled_scan(features, window, self.conv, state.S, resets, self.heads)
        if result is None:
            convolved, window = self._convolved(features, window, resets)
            o, S = delta_rule_scan(*self._split(convolved), state.S, resets)
        else:
            o, S, window = result
        return ScanResult(self.out(o.flatten(-2)), DeltaNetState(S, window.view_as(state.window)),
                          {})

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, heads={self.heads}, head_size={self.head_size}, "
                f"conv_size={self.conv_size}")

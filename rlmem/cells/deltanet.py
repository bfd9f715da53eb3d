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
from rlmem.cells.base import Cell, Dims, ScanResult
from rlmem.cells.registry import register


class DeltaNetState(NamedTuple):
    S: Annotated[Tensor, Dims("heads", "head_size", "head_size")]
    r"""The fast weights :math:`S_{t-1}` of every head, ``(B, heads, d_v, d_k)``."""


@register("deltanet")
class DeltaNet(Cell):
    r"""Linear attention with the delta rule (DeltaNet), one layer of ``heads`` heads.

    Per head, a fast-weight matrix :math:`S` that each step corrects towards mapping the key
    :math:`k_t` to the value :math:`v_t`, by the fraction :math:`\beta_t` (the delta rule), and
    that the query reads:

    .. math::
        q_t &= \frac{\phi(W_q x_t)}{\lVert \phi(W_q x_t) \rVert} \qquad
        k_t = \frac{\phi(W_k x_t)}{\lVert \phi(W_k x_t) \rVert} \qquad
        v_t = W_v x_t \qquad \beta_t = \sigma(W_\beta x_t + b_\beta) \\
        S_t &= S_{t-1} + \beta_t (v_t - S_{t-1} k_t) k_t^\top
             = S_{t-1} (I - \beta_t k_t k_t^\top) + \beta_t v_t k_t^\top \\
        o_t &= S_t q_t \qquad y_t = W_o [o_t^{(1)}; \dots; o_t^{(h)}] + b_o

    with :math:`\phi` = SiLU and the norms per head. The reference loop is
    :func:`~rlmem.cells.base.scan` over :meth:`step` (the delta rule as first written); a
    chunk runs on the CPU as that recurrence compiled, with a backward written out, and
    elsewhere in blocks through the chunkwise (WY) form of Yang et al. (2024), one triangular
    solve per block, which the second form (linear in :math:`S`) allows
    (:mod:`~rlmem.cells._engines.delta_rule`).

    Which paper: the update is Schlag et al.'s delta rule with one learned
    :math:`\beta_t` per head; the feature map and normalisation are Yang et al.'s DeltaNet
    (SiLU, then :math:`L_2`-normalised queries and keys, which keeps
    :math:`\lVert I - \beta k k^\top \rVert \le 1`: Schlag et al. use DPFP features with sum
    normalisation). Ungated, as both (a decay gate is Gated DeltaNet, Yang et al., 2025).
    Departures: no short convolution before :math:`q, k, v`, no SiLU on :math:`v` and no
    output normalisation (Yang et al.'s full layer has them), and :math:`W_q, W_k, W_v` have
    no bias.

    Args:
        input_size: features of each input.
        hidden_size: features of the output :math:`y_t`.
        heads: h, the number of heads.
        head_size: :math:`d_k = d_v`, features per head (None: :math:`\lceil` hidden_size
            / heads :math:`\rceil`); :math:`W_o` maps the heads' ``heads · head_size``
            features to ``hidden_size``.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`DeltaNetState`,
          ``(B, heads, head_size, head_size)``
    """

    state_type = DeltaNetState

    def __init__(self, input_size: int, hidden_size: int, *, heads: int = 4,
                 head_size: int | None = None) -> None:
        super().__init__(input_size, hidden_size)
        if heads <= 0 or (head_size is not None and head_size <= 0):
            raise ValueError(f"DeltaNet: heads and head_size must be positive, got {heads}, "
                             f"{head_size}")
        self.heads = heads
        self.head_size = head_size if head_size is not None else -(-hidden_size // heads)
        width = heads * self.head_size
        self.qkv = nn.Linear(input_size, 3 * width, bias=False)
        self.beta = nn.Linear(input_size, heads)
        self.out = nn.Linear(width, hidden_size)

    def project_input(self, x: Tensor) -> Tensor:
        r"""Every step's :math:`[W_q x_t, W_k x_t, W_v x_t, W_\beta x_t + b_\beta]`, one
        matmul (the feature map, the norms and σ are applied by :meth:`_split`, so nothing is
        copied into a joint tensor).

        Shapes:
            - x: ``(T, B, input_size)``; returns ``(T, B, 3 heads d + heads)``
        """
        weight = torch.cat([self.qkv.weight, self.beta.weight])
        bias = torch.cat([self.beta.bias.new_zeros(self.qkv.out_features), self.beta.bias])
        return functional.linear(x, weight, bias)

    def _split(self, features: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """:meth:`project_input`'s features as q, k, v ``(*, heads, d)`` and β
        ``(*, heads, 1)``: the feature map, which the compiled chunk (``csrc/delta_rule.h``)
        applies inside its loop, proved equal in the tests."""
        width = self.heads * self.head_size
        q, k, v, beta = features.split([width, width, width, self.heads], -1)
        q, k, v = (part.unflatten(-1, (self.heads, self.head_size)) for part in (q, k, v))
        q, k = (functional.normalize(functional.silu(part), dim=-1) for part in (q, k))
        return q, k, v, torch.sigmoid(beta).unsqueeze(-1)

    def step(self, x_t: Tensor, state: DeltaNetState
             ) -> tuple[Tensor, DeltaNetState, dict[str, Tensor]]:
        r""":math:`S_t = S_{t-1} + \beta_t (v_t - S_{t-1} k_t) k_t^\top`, then the readout."""
        _, k, v, beta = self._split(x_t)
        error = v - (state.S @ k.unsqueeze(-1)).squeeze(-1)
        S = state.S + (beta * error).unsqueeze(-1) * k.unsqueeze(-2)
        return self.readout(x_t, S), DeltaNetState(S), {}

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
        result = compiled_scan(features, state.S, resets, self.heads)
        o, S = result if result is not None else delta_rule_scan(*self._split(features),
                                                                 state.S, resets)
        return ScanResult(self.out(o.flatten(-2)), DeltaNetState(S), {})

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, heads={self.heads}, head_size={self.head_size}"

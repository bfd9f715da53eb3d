r"""Additive (Bahdanau) attention over a bounded set of memory slots.

Shared by :class:`~rlmem.cells.memlstm.MemLSTM` (every past state) and the relevancy-screening
cells (short-term buffer and relevant set).

The engines (:mod:`rlmem.cells._engines.screened`, :mod:`rlmem.cells._engines.full_attention`)
compute in the "doubled" form: :math:`\tanh(x) = 2\sigma(2x) - 1`, with the
factor 2 folded into the weights (:meth:`AdditiveAttention.doubled`,
:meth:`~rlmem.cells.lstm_base.LSTMBase.doubled`, gathered in :class:`Weights`), because on CPU
torch's ``tanh`` is several times slower than its ``sigmoid``. It is the same function; only
rounding differs. The cells' steps, their reference, are the textbook form
(:meth:`AdditiveAttention.forward`).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells._engines.onednn_linear import linear


class Weights(NamedTuple):
    r"""An attentive cell's recurrent weights in the doubled form, as its engines
    read them: built from the parameters under autograd on every call.

    ``z = [xp[t], 2 b_a] + s_{t-1} W^\top`` gives both the base pre-activation and the
    attention query in one matmul (``xp``, the input projected with the cell's doubled input
    weight and bias, carries the base's input terms). Every pre-activation that goes through
    a ``tanh`` is doubled so that it can be computed as :math:`2\sigma(2x) - 1`: the ``g``
    block of the LSTM (or the whole tanh-RNN pre-activation), the query, the keys and the
    score vector.
    """

    recurrent: Tensor
    """``(G + H, H)``: the base's recurrent weights (``G`` rows) over ``2 W_a``."""
    key: Tensor
    """``(H, H)``: ``2 U_a``."""
    score: Tensor
    """``(H,)``: ``2 v_a``."""
    query_bias: Tensor
    """``(H,)``: ``2 b_a``."""


def project(x: Tensor, weight_t: Tensor, bias: Tensor) -> Tensor:
    """``x W^T + b`` over all ``T × B`` inputs in one matmul: an attentive cell's
    ``project_input``.

    ``weight_t`` is ``W^T``, contiguous: autograd then forms the weight's gradient as
    ``x^T @ grad``, many times faster than ``grad^T @ x`` when the input is narrow (copy's 10
    symbols).

    Shapes: x ``(T, B, I)``; weight_t ``(I, G)``; bias ``(G,)``; returns ``(T, B, G)``.
    """
    steps, batch, features = x.shape
    # linear(x, W, b) is addmm(b, x, W^T) with W^T = weight_t itself, outside onednn_products
    return linear(x.reshape(-1, features), weight_t.t(), bias).view(steps, batch, -1)


class AdditiveAttention(nn.Module):
    r"""Scores and reads memory slots with the alignment of Bahdanau et al. (2014).

    .. math::
        \tilde z_i = v_a^\top \tanh(W_a q + U_a m_i) \qquad
        z = \mathrm{softmax}(\tilde z \text{ over valid slots}) \qquad
        \text{read} = \textstyle\sum_i z_i m_i

    Args:
        hidden_size: size of the query ``q`` and of each slot ``m_i``.
    """

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.query = nn.Linear(hidden_size, hidden_size)  # W_a (with the bias)
        self.key = nn.Linear(hidden_size, hidden_size, bias=False)  # U_a
        self.score = nn.Linear(hidden_size, 1, bias=False)  # v_a

    def doubled(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""``2 W_a, 2 b_a, 2 U_a, 2 v_a``: the weights of the doubled form.

        :math:`v_a^\top \tanh(W_a q + b_a + U_a m) = (2 v_a)^\top
        \sigma(2 W_a q + 2 b_a + 2 U_a m) - \textstyle\sum v_a`, and the softmax over slots
        ignores the constant :math:`\sum v_a`.

        Shapes: ``(H, H)``, ``(H,)``, ``(H, H)``, ``(H,)``.
        """
        return (2.0 * self.query.weight, 2.0 * self.query.bias, 2.0 * self.key.weight,
                2.0 * self.score.weight.squeeze(0))

    @staticmethod
    def attend_doubled(query: Tensor, memory: Tensor, keys: Tensor, valid: Tensor,
                       score: Tensor, key_scale: float = 1.0) -> tuple[Tensor, Tensor]:
        """:meth:`forward` in the doubled form, from a projected query ``2 W_a q + 2 b_a``,
        keys ``2 U_a m`` (or ``U_a m`` with ``key_scale`` 2) and the doubled score vector
        ``2 v_a``.

        Shapes: query ``(B, H)``; memory, keys ``(B, N, H)``; valid ``(B, N)`` bool; score
        ``(H,)``; returns the weights ``(B, N)`` and the read ``(B, H)``.
        """
        pre = torch.add(query.unsqueeze(1), keys, alpha=key_scale)
        logits = torch.matmul(pre.sigmoid_(), score)
        weights = torch.softmax(logits.masked_fill(~valid, float("-inf")), dim=-1)
        return weights, torch.bmm(weights.unsqueeze(1), memory).squeeze(1)

    def keys(self, memory: Tensor) -> Tensor:
        """``U_a m`` for each slot; MemLSTM caches it so each step projects one new state."""
        return self.key(memory)

    def forward(self, query: Tensor, memory: Tensor, valid: Tensor,
                keys: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Attend from ``query`` over the valid slots of ``memory``.

        Every row of ``valid`` must have at least one true entry.

        Shapes:
            - query: ``(B, H)``; memory: ``(B, N, H)``; valid: ``(B, N)`` bool
            - keys (optional, ``U_a m``): ``(B, N, H)``
            - returns the weights ``z`` ``(B, N)`` (zero on invalid slots) and the read ``(B, H)``
        """
        keys = self.keys(memory) if keys is None else keys
        logits = self.score(torch.tanh(self.query(query).unsqueeze(1) + keys)).squeeze(-1)
        weights = torch.softmax(logits.masked_fill(~valid, float("-inf")), dim=-1)
        return weights, torch.einsum("bn,bnh->bh", weights, memory)

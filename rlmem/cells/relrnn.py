"""ReLRNN: relevancy screening on a simple-RNN base (Kerg et al., 2020, §2 and Algorithm 1).

Reference: G. Kerg, B. Kanuparthi, A. Goyal, K. Goyette, Y. Bengio, G. Lajoie. "Learning
Long-term Dependencies Using Cognitive Inductive Biases in Self-attention RNNs", 2020.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

import torch
from torch import Tensor, nn

from rlmem.cells.modrelu import ModReLU
from rlmem.cells.options import enum_option
from rlmem.cells.registry import register
from rlmem.cells.screening import (
    EpisodeStep,
    MacroState,
    Readout,
    RelevancyScreening,
    Relevant,
    RelevantScore,
    RelevantTime,
    RelevantValid,
    ResetRule,
    Screening,
    ShortTerm,
    ShortTermScore,
    ShortTermTime,
    ShortTermValid,
)


class BaseNonlinearity(Enum):
    """φ of ReLRNN's base recurrence, Eq. 1."""

    tanh = "tanh"
    """tanh (Kerg et al., Table 5: copy)."""
    modrelu = "modrelu"
    """modReLU with a learned bias per unit (:class:`~rlmem.cells.modrelu.ModReLU`; Kerg et
    al., Tables 6 and 8: denoise and sequential MNIST)."""


class ReLRNNState(NamedTuple):
    """State of :class:`ReLRNN`: the macro-state and the screened memory (the fields' types in
    :mod:`rlmem.cells.screening` say what each holds)."""

    s: MacroState
    t: EpisodeStep
    short: ShortTerm
    short_score: ShortTermScore
    short_valid: ShortTermValid
    short_time: ShortTermTime
    relevant: Relevant
    relevant_score: RelevantScore
    relevant_valid: RelevantValid
    relevant_time: RelevantTime


@register("relrnn")
class ReLRNN(RelevancyScreening):
    r"""Relevancy-screening RNN (ReLRNN, Kerg et al. 2020): relevancy screening on a simple RNN.

    One step (Algorithm 1), with :math:`s_{t-1}` the previous macro-state, S the short-term
    buffer of the last ν states and R the relevant set of ρ states; the base is Eq. 1:

    .. math::
        h_t &= \phi(V s_{t-1} + U x_t + b) \\
        S_t &= S_{t-1} \cup \{h_t\} \text{, minus } h_{t-\nu} \text{ when full} \\
        R_t &= R_{t-1}.\mathrm{replaceWith}(h_{t-\nu}) \text{ if } C(t-\nu) \\
        \tilde z_i &= v_a^\top \tanh(W_a s_{t-1} + U_a m_i), \quad m_i \in M_t = [S_t, R_t] \\
        s_t &= h_t + \textstyle\sum_i \mathrm{softmax}(\tilde z)_i\, m_i

    φ is tanh (copy, Table 5) or modReLU (denoise and sequential MNIST, Tables 6 and 8),
    :math:`\mathrm{modReLU}(z)_i = \mathrm{sign}(z_i) \max(|z_i| + b^m_i, 0)` with a learned
    bias :math:`b^m` of its own (:class:`~rlmem.cells.modrelu.ModReLU`; Eq. 1's :math:`b` is
    kept, a shift of z before the magnitude is taken). Only tanh runs through the chunk
    engine; modReLU runs :meth:`step` under autograd, several times slower to train.

    Relevance :math:`\beta(i) = \sum_{j=i}^{i+\nu-1} \alpha_{i,j}` and the screening C(i) are
    ReLSTM's (:class:`~rlmem.cells.relstm.ReLSTM`,
    :class:`~rlmem.cells.screening.RelevancyScreening`): R starts with the first ρ states of
    every sequence, unless ``screening=normalised``.

    Args:
        input_size: features of each input.
        hidden_size: size of :math:`h`, :math:`s` and each memory slot.
        short_term: ν, the length of the short-term buffer.
        relevant: ρ, the capacity of the relevant set.
        nonlinearity: φ, :attr:`BaseNonlinearity.tanh` or :attr:`BaseNonlinearity.modrelu`; a
            member or its name.
        screening: :attr:`Screening.algorithm1` (the paper's) or the ablation
            :attr:`Screening.normalised`; a member or its name.
        readout: :attr:`Readout.algorithm1` (the paper's: emit :math:`s_t`) or
            :attr:`Readout.authors_code` (the authors' public code: emit :math:`h_t`, and
            recur on :math:`s_t = \tfrac12 (h_t + \text{read}_t)`; runs :meth:`step`, several
            times slower to train); a member or its name.
        reset_rule: :attr:`ResetRule.algorithm1` (the paper's: the memory holds the episode,
            however it is cut into calls) or :attr:`ResetRule.authors_code` (the authors' RL
            code: the memory lasts one call, so acting one step at a time runs no attention and
            a BPTT chunk attends from its own start; needs ``readout=authors_code``); a member
            or its name.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`ReLRNNState`; traces as ReLSTM
    """

    state_type = ReLRNNState

    def __init__(self, input_size: int, hidden_size: int, *, short_term: int = 5,
                 relevant: int = 5, nonlinearity: BaseNonlinearity = BaseNonlinearity.tanh,
                 screening: Screening = Screening.algorithm1,
                 readout: Readout = Readout.algorithm1,
                 reset_rule: ResetRule = ResetRule.algorithm1) -> None:
        super().__init__(input_size, hidden_size, short_term=short_term, relevant=relevant,
                         screening=screening, readout=readout,
                         reset_rule=reset_rule)
        self.nonlinearity = enum_option(BaseNonlinearity, nonlinearity, "ReLRNN",
                                        "nonlinearity")
        self.input_map = nn.Linear(input_size, hidden_size)  # U and b
        self.recurrent_map = nn.Linear(hidden_size, hidden_size, bias=False)  # V
        if self.nonlinearity is BaseNonlinearity.modrelu:
            self.modrelu = ModReLU(hidden_size)

    def runs_engine(self) -> bool:
        return super().runs_engine() and self.nonlinearity is BaseNonlinearity.tanh

    def base_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        # tanh(V s + U x + b) = 2σ(2V s + 2U x + 2b) - 1
        return (2.0 * self.input_map.weight, 2.0 * self.input_map.bias,
                2.0 * self.recurrent_map.weight)

    def project_input(self, x: Tensor) -> Tensor:
        """The base's input terms :math:`U x_t + b`, all steps at once.

        Shapes: x ``(T, B, input_size)``; returns ``(T, B, hidden_size)``.
        """
        return self.input_map(x)

    def base_step(self, x_t: Tensor, state: ReLRNNState) -> tuple[Tensor, dict[str, Tensor]]:
        pre = x_t + self.recurrent_map(state.s)  # V s_{t-1} + U x_t + b
        if self.nonlinearity is BaseNonlinearity.modrelu:
            return self.modrelu(pre), {}
        return torch.tanh(pre), {}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, nonlinearity={self.nonlinearity.name}"

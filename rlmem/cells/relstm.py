"""ReLSTM: relevancy screening on an LSTM base (Kerg et al., 2020, §2 and Algorithm 1).

Reference: G. Kerg, B. Kanuparthi, A. Goyal, K. Goyette, Y. Bengio, G. Lajoie. "Learning
Long-term Dependencies Using Cognitive Inductive Biases in Self-attention RNNs", 2020.
"""

from __future__ import annotations

from typing import Annotated, NamedTuple

from torch import Tensor

from rlmem.cells.base import Dims
from rlmem.cells.lstm_base import LSTMBase
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


class ReLSTMState(NamedTuple):
    """State of :class:`ReLSTM`: the macro-state, the LSTM cell state and the screened memory
    (the fields' types in :mod:`rlmem.cells.screening` say what each holds)."""

    s: MacroState
    c: Annotated[Tensor, Dims("hidden_size")]
    """The LSTM base's cell state :math:`c_{t-1}`, ``(B, H)``."""
    t: EpisodeStep
    short: ShortTerm
    short_score: ShortTermScore
    short_valid: ShortTermValid
    short_time: ShortTermTime
    relevant: Relevant
    relevant_score: RelevantScore
    relevant_valid: RelevantValid
    relevant_time: RelevantTime


@register("relstm")
class ReLSTM(RelevancyScreening):
    r"""Relevancy-screening LSTM (ReLLSTM, Kerg et al. 2020): relevancy screening on an LSTM.

    One step (Algorithm 1), with :math:`s_{t-1}` the previous macro-state, S the short-term
    buffer of the last ν states and R the relevant set of ρ states:

    .. math::
        (h_t, c_t) &= \mathrm{LSTMCell}(x_t, (s_{t-1}, c_{t-1})) \\
        S_t &= S_{t-1} \cup \{h_t\} \text{, minus } h_{t-\nu} \text{ when full} \\
        R_t &= R_{t-1}.\mathrm{replaceWith}(h_{t-\nu}) \text{ if } C(t-\nu) \\
        \tilde z_i &= v_a^\top \tanh(W_a s_{t-1} + U_a m_i), \quad m_i \in M_t = [S_t, R_t] \\
        s_t &= h_t + \textstyle\sum_i \mathrm{softmax}(\tilde z)_i\, m_i

    The relevance of a state is the attention it received over its ν steps in S,
    :math:`\beta(i) = \sum_{j=i}^{i+\nu-1} \alpha_{i,j}`. C(i), the screening
    (:func:`~rlmem.cells.screening.screen`): a state leaving S enters R into a free slot, or
    by beating the lowest score in R, whose state it replaces. So **R starts with the first
    ρ states of every sequence**; ``screening=normalised`` is the ablation that admits a state
    only with more than its uniform share of attention
    (:class:`~rlmem.cells.screening.RelevancyScreening` says why it matters on copy, and when
    the chunk engine or the step path runs).

    Args:
        input_size: features of each input.
        hidden_size: size of :math:`h`, :math:`s` and each memory slot.
        short_term: ν, the length of the short-term buffer (paper: 5 for RL, 10 for copy).
        relevant: ρ, the capacity of the relevant set (paper: 5 for RL, 10 for copy).
        forget_bias: initial forget-gate bias of the LSTM base (see :class:`~rlmem.cells.LSTM`).
        chrono_t_max: the LSTM base's chrono initialisation (see :class:`~rlmem.cells.LSTM`).
        screening: :attr:`Screening.algorithm1` (the paper's; R starts with the first ρ
            states) or the ablation :attr:`Screening.normalised`; a member or its name.
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
        - output: ``(T, B, hidden_size)``, the macro-states :math:`s_t`
        - state: :class:`ReLSTMState`; traces ``attention`` ``(T, B, ν+ρ)`` over ``[S, R]``,
          ``slot_time`` ``(T, B, ν+ρ)`` (episode step each slot holds, -1 when empty),
          ``relevant_valid`` and ``relevant_score`` ``(T, B, ρ)``
    """

    state_type = ReLSTMState

    def __init__(self, input_size: int, hidden_size: int, *, short_term: int = 5,
                 relevant: int = 5, forget_bias: float | None = 1.0,
                 chrono_t_max: int | None = None,
                 screening: Screening = Screening.algorithm1,
                 readout: Readout = Readout.algorithm1,
                 reset_rule: ResetRule = ResetRule.algorithm1) -> None:
        super().__init__(input_size, hidden_size, short_term=short_term, relevant=relevant,
                         screening=screening, readout=readout,
                         reset_rule=reset_rule)
        self.base = LSTMBase(input_size, hidden_size, forget_bias, chrono_t_max)

    def base_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        return self.base.doubled()

    def project_input(self, x: Tensor) -> Tensor:
        """The LSTM gates' input terms :math:`W_{ih} x_t + b_{ih} + b_{hh}`, all steps at once.

        Shapes: x ``(T, B, input_size)``; returns ``(T, B, 4 hidden_size)``.
        """
        return self.base.input_terms(x)

    def base_step(self, x_t: Tensor, state: ReLSTMState) -> tuple[Tensor, dict[str, Tensor]]:
        h, c = self.base.step(x_t, state.s, state.c)
        return h, {"c": c}

"""Relevancy screening: ReLSTM and ReLRNN (Kerg et al., 2020), paper §2 and Algorithm 1.

Reference: G. Kerg, B. Kanuparthi, A. Goyal, K. Goyette, Y. Bengio, G. Lajoie. "Learning
Long-term Dependencies Using Cognitive Inductive Biases in Self-attention RNNs", 2020.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from enum import Enum
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from rlmem.cells.attention import AdditiveAttention, LSTMBase
from rlmem.cells.attention_scan import (
    Weights,
    outside_autocast,
    prepared,
    project,
    screened_scan,
    screened_step,
    short_scan,
    wants_engine,
)
from rlmem.cells.base import Cell
from rlmem.cells.modrelu import ModReLU
from rlmem.cells.options import enum_option
from rlmem.cells.registry import register

_MEMORY_FIELDS: list[tuple[str, type]] = [
    ("t", Tensor),  # steps consumed since the episode started, (B,) long (labels for figures)
    ("short", Tensor),  # short-term buffer S of the last ν states h, oldest first, (B, ν, H)
    ("short_score", Tensor),  # attention each buffered state has received so far, (B, ν)
    ("short_valid", Tensor),  # which buffer slots hold a state, (B, ν) bool
    ("short_time", Tensor),  # episode step at which each buffered state was made, (B, ν) long
    ("relevant", Tensor),  # relevant set R, (B, ρ, H)
    ("relevant_score", Tensor),  # relevance β(i) of each state in R, frozen on entry, (B, ρ)
    ("relevant_valid", Tensor),  # which slots of R hold a state, (B, ρ) bool
    ("relevant_time", Tensor),  # episode step at which each state in R was made, (B, ρ) long
]
"""The fields of the screened memory, shared by both cells' states."""

ReLSTMState = NamedTuple("ReLSTMState", [("s", Tensor), ("c", Tensor), *_MEMORY_FIELDS])
ReLSTMState.__doc__ = """State of :class:`ReLSTM`: the macro-state ``s`` :math:`s_{t-1}` (the
output, and what the recurrence reads), the LSTM cell state ``c``, each ``(B, H)``, and the
screened memory (see ``_MEMORY_FIELDS``)."""

ReLRNNState = NamedTuple("ReLRNNState", [("s", Tensor), *_MEMORY_FIELDS])
ReLRNNState.__doc__ = """State of :class:`ReLRNN`: the macro-state ``s`` :math:`s_{t-1}`,
``(B, H)``, and the screened memory (see ``_MEMORY_FIELDS``)."""


class Screening(Enum):
    """How a state leaving the short-term buffer S is screened into the relevant set R."""

    algorithm1 = "algorithm1"
    r"""Algorithm 1 as written: relevance :math:`\beta(i)` is the attention a state received
    over its ν steps in S; it enters R into a free slot, or by beating the lowest score in
    R. R therefore starts with the first ρ states of every sequence."""
    normalised = "normalised"
    r"""An ablation: each attention weight is counted relative to the uniform share of its
    step, :math:`\hat\beta(i) = \frac{1}{\nu}\sum_{j=i}^{i+\nu-1} \alpha_{i,j}\,|M_j|`
    (1 for a state that drew exactly its share), and an empty slot of R holds the
    score 1: a state enters R only if it drew more than its share, and beats the lowest
    score in R when R is full. Early states gain nothing from the few slots they compete
    with, and R fills only with states that attention singled out."""


UNIFORM_SHARE = 1.0
""":class:`Screening.normalised`'s relevance of a state that drew exactly its uniform share of
attention, and the score an empty slot of R holds."""


class BaseNonlinearity(Enum):
    """φ of ReLRNN's base recurrence, Eq. 1."""

    tanh = "tanh"
    """tanh (Kerg et al., Table 5: copy)."""
    modrelu = "modrelu"
    """modReLU with a learned bias per unit (:class:`~rlmem.cells.modrelu.ModReLU`; Kerg et
    al., Tables 6 and 8: denoise and sequential MNIST)."""


def screen(relevant: Tensor, score: Tensor, valid: Tensor, time: Tensor, candidate: Tensor,
           candidate_score: Tensor, candidate_valid: Tensor, candidate_time: Tensor,
           floor: float = float("-inf")) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The screening rule C(i): a state leaving S enters R if R has a free slot, or if its
    relevance beats the lowest score in R, whose state it then replaces.

    ``floor`` is the score an empty slot counts as: ``-inf`` (Algorithm 1) lets any state into
    a free slot; :data:`UNIFORM_SHARE` (:class:`Screening.normalised`) only one that beats it.
    The selection is not differentiable; the stored state stays in the autograd graph.

    Shapes:
        - relevant ``(B, ρ, H)``; score ``(B, ρ)``; valid ``(B, ρ)`` bool; time ``(B, ρ)``
        - candidate ``(B, H)``; candidate_score ``(B,)``; candidate_valid ``(B,)`` bool;
          candidate_time ``(B,)``
        - returns the new ``relevant, score, valid, time``
    """
    free = ~valid
    has_free = free.any(dim=-1)
    lowest_score, lowest = score.masked_fill(free, float("inf")).min(dim=-1)
    slot = torch.where(has_free, free.to(torch.uint8).argmax(dim=-1), lowest)
    bar = torch.where(has_free, torch.full_like(lowest_score, floor), lowest_score)
    enter = candidate_valid & (candidate_score > bar)
    write = F.one_hot(slot, relevant.shape[1]).bool() & enter.unsqueeze(-1)
    return (torch.where(write.unsqueeze(-1), candidate.unsqueeze(1), relevant),
            torch.where(write, candidate_score.unsqueeze(-1), score),
            valid | write,
            torch.where(write, candidate_time.unsqueeze(-1), time))


class _RelevancyScreening(Cell):
    r"""Relevancy screening on a recurrent base; subclasses give the base recurrence.

    One step (Algorithm 1), with :math:`s_{t-1}` the previous macro-state:

    .. math::
        h_t &= \text{base}(s_{t-1}, x_t) \\
        S_t &= S_{t-1} \cup \{h_t\} \text{, minus } h_{t-\nu} \text{ when full} \\
        R_t &= R_{t-1}.\mathrm{replaceWith}(h_{t-\nu}) \text{ if } C(t-\nu) \\
        \tilde z_i &= v_a^\top \tanh(W_a s_{t-1} + U_a m_i), \quad m_i \in M_t = [S_t, R_t] \\
        s_t &= h_t + \textstyle\sum_i \mathrm{softmax}(\tilde z)_i\, m_i

    The relevance of a state is the attention it received over its ν steps in S,
    :math:`\beta(i) = \sum_{j=i}^{i+\nu-1} \alpha_{i,j}`; when it leaves S it enters R if R has a
    free slot or if :math:`\beta(i)` beats the lowest score in R (see :func:`screen`). Memory and
    compute per step are O(ν+ρ), independent of the sequence length.

    **R starts with the first ρ states of every sequence**, whatever their relevance. This is
    faithful to Algorithm 1 but easy to miss: R is empty at the start of every episode, so the
    first ρ states to leave S enter its free slots without competing, and early states share
    attention with few slots, which inflates their relevance against later candidates. On
    copy with ν = ρ = 10 those first states are exactly the ten symbols to recall, so part of
    relstm's advantage over ``lstm`` on copy comes from this rule rather than from learned
    relevance. ``screening=normalised`` (:class:`Screening`) is the ablation that measures
    it: relevance counted relative to the uniform share of attention, and a state admitted
    to R only if it drew more than that share, so R starts empty of the first states unless
    attention singled them out.

    A chunk runs through :func:`~rlmem.cells.attention_scan.screened_scan` (no autograd inside
    the loop, a hand-written backward), in the parameters' dtype even under autocast. The same
    math also runs one step at a time through :meth:`step`: for a rollout's few steps without
    autograd (its prepared weights kept between calls), for parameters other than float32
    and float64, and for the options the engine does not implement (``screening=normalised``,
    ReLRNN's ``modrelu``), which train through autograd step by step, several times slower.
    """

    def __init__(self, input_size: int, hidden_size: int, *, short_term: int = 5,
                 relevant: int = 5, screening: Screening = Screening.algorithm1) -> None:
        super().__init__(input_size, hidden_size)
        if short_term < 1 or relevant < 1:
            raise ValueError(f"{type(self).__name__}: need short_term ≥ 1 and relevant ≥ 1, got "
                             f"short_term={short_term}, relevant={relevant}")
        self.short_term = short_term
        self.relevant = relevant
        self.screening = enum_option(Screening, screening, type(self).__name__, "screening")
        self.attention = AdditiveAttention(hidden_size)

    def runs_engine(self) -> bool:
        """Whether :func:`~rlmem.cells.attention_scan.screened_scan` implements this cell's
        options (Algorithm 1's screening and a tanh or LSTM base); else :meth:`step` runs."""
        return self.screening is Screening.algorithm1

    def state_shapes(self) -> Mapping[str, tuple[tuple[int, ...], torch.dtype | None]]:
        hidden, nu, rho = self.hidden_size, self.short_term, self.relevant
        shapes: dict[str, tuple[tuple[int, ...], torch.dtype | None]] = {
            "s": ((hidden,), None)}
        if "c" in self.state_type._fields:
            shapes["c"] = ((hidden,), None)
        shapes.update({
            "t": ((), torch.long),
            "short": ((nu, hidden), None), "short_score": ((nu,), None),
            "short_valid": ((nu,), torch.bool), "short_time": ((nu,), torch.long),
            "relevant": ((rho, hidden), None), "relevant_score": ((rho,), None),
            "relevant_valid": ((rho,), torch.bool), "relevant_time": ((rho,), torch.long),
        })
        return shapes

    # --- the base recurrence, in the doubled form of rlmem.cells.attention ------------------

    @abc.abstractmethod
    def base_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """The base's input weight ``(G, input)``, bias ``(G,)`` and recurrent weight
        ``(G, H)``, tanh pre-activations doubled; ``G`` is the size of its pre-activation."""

    @abc.abstractmethod
    def base_step(self, z: Tensor, state: Any) -> tuple[Tensor, dict[str, Tensor]]:
        """``h_t`` and the updated base fields (``c`` for the LSTM) from the pre-activation
        ``z`` ``(B, G)``."""

    def _weights(self) -> tuple[Tensor, Tensor, Weights]:
        """The transposed input weight and the bias of :meth:`project_input`, and the engine's
        :class:`Weights` (the doubled form of :mod:`rlmem.cells.attention`)."""
        def build() -> tuple[Tensor, Tensor, Weights]:
            w_in, b_in, w_rec = self.base_weights()
            query, query_bias, key, score = self.attention.doubled()
            return (w_in.t().contiguous(), b_in,
                    Weights(torch.cat([w_rec, query]), key, score, query_bias))
        return prepared(self, build)

    def project_input(self, x: Tensor) -> Tensor:
        """The base's input terms ``U x + b`` (tanh pre-activations doubled) for all steps in
        one matmul; ``G`` is the size of the base's pre-activation.

        Shapes: x ``(T, B, input_size)``; returns ``(T, B, G)``.
        """
        w_in, bias, _ = self._weights()
        return project(x, w_in, bias)

    def step(self, x_t: Tensor, state: Any) -> tuple[Tensor, Any, dict[str, Tensor]]:
        """One step of the docstring's equations, through autograd; ``x_t`` is a step of
        :meth:`project_input`, ``(B, G)``."""
        return self._step(x_t, state, self._weights()[2])

    def _step(self, x_t: Tensor, state: Any,
              weights: Weights) -> tuple[Tensor, Any, dict[str, Tensor]]:
        """:meth:`step` with the prepared weights given."""
        gates = x_t.shape[1]
        z = torch.addmm(x_t, state.s, weights.recurrent[:gates].t())
        query = torch.addmm(weights.query_bias, state.s, weights.recurrent[gates:].t())
        h, base_fields = self.base_step(z, state)
        batch = h.shape[0]
        true = torch.ones(batch, 1, dtype=torch.bool, device=h.device)

        # h_{t-ν} leaves S (slot 0 is the oldest) and is screened into R, as by screen(): with
        # empty slots ranked at the floor (-inf in Algorithm 1), the first free slot, else the
        # first lowest score, is the target.
        normalised = self.screening is Screening.normalised
        floor = UNIFORM_SHARE if normalised else float("-inf")
        lowest, slot = state.relevant_score.masked_fill(~state.relevant_valid, floor).min(dim=1)
        enter = state.short_valid[:, 0] & (state.short_score[:, 0] > lowest)
        write = (slot.unsqueeze(1) == torch.arange(self.relevant, device=h.device)) & \
            enter.unsqueeze(1)
        relevant = torch.where(write.unsqueeze(2), state.short[:, :1], state.relevant)
        relevant_score = torch.where(write, state.short_score[:, :1], state.relevant_score)
        relevant_valid = state.relevant_valid | write
        relevant_time = torch.where(write, state.short_time[:, :1], state.relevant_time)
        short = torch.cat([state.short[:, 1:], h.unsqueeze(1)], dim=1)
        short_score = torch.cat([state.short_score[:, 1:], torch.zeros_like(state.s[:, :1])], 1)
        short_valid = torch.cat([state.short_valid[:, 1:], true], dim=1)
        short_time = torch.cat([state.short_time[:, 1:], state.t.unsqueeze(1)], dim=1)

        memory = torch.cat([short, relevant], dim=1)
        valid = torch.cat([short_valid, relevant_valid], dim=1)
        weights_t, read = self.attention.attend_doubled(
            query, memory, torch.matmul(memory, weights.key.t()), valid, weights.score)
        s = h + read
        received = weights_t[:, :self.short_term].detach()
        if normalised:  # relative to the uniform share 1/|M_t|, averaged over the ν steps
            received = received * (valid.sum(dim=1, keepdim=True) / self.short_term)
        new_state = state._replace(
            s=s, t=state.t + 1, **base_fields,
            short=short, short_score=short_score + received,
            short_valid=short_valid, short_time=short_time,
            relevant=relevant, relevant_score=relevant_score,
            relevant_valid=relevant_valid, relevant_time=relevant_time)
        traces = {
            "attention": weights_t,
            "slot_time": torch.cat([short_time, relevant_time], 1).masked_fill(~valid, -1),
            "relevant_valid": relevant_valid,
            "relevant_score": relevant_score,
        }
        return s, new_state, traces

    def _scan(self, x: Tensor, state: Any, resets: Tensor) -> tuple[Tensor, Any,
                                                                     dict[str, Tensor]]:
        escaped = outside_autocast(self._scan, x, state, resets,
                                   self.attention.score.weight.dtype)
        if escaped is not None:
            return escaped
        w_in, bias, weights = self._weights()
        xp = project(x, w_in, bias)
        result = None
        if self.runs_engine() and wants_engine(x.shape[0], (xp, *weights, *state)):
            result = screened_scan(
                xp, weights, state.s, getattr(state, "c", None), state.short,
                state.short_score, state.short_valid, state.short_time, state.relevant,
                state.relevant_score, state.relevant_valid, state.relevant_time, state.t,
                resets)
        if result is None and self.runs_engine():
            result = screened_step(
                xp, weights, state.s, getattr(state, "c", None), state.short,
                state.short_score, state.short_valid, state.short_time, state.relevant,
                state.relevant_score, state.relevant_valid, state.relevant_time, state.t,
                resets)
        if result is None:
            return short_scan(lambda x_t, state_t: self._step(x_t, state_t, weights), xp,
                              state, resets)
        base_fields = {"c": result.c} if result.c is not None else {}
        new_state = state._replace(
            s=result.y[-1], t=result.t, **base_fields,
            short=result.short, short_score=result.short_score, short_valid=result.short_valid,
            short_time=result.short_time, relevant=result.relevant,
            relevant_score=result.relevant_score, relevant_valid=result.relevant_valid,
            relevant_time=result.relevant_time)
        return result.y, new_state, result.traces

    def diagnostics(self, traces: dict[str, Tensor]) -> dict[str, Tensor]:
        valid = traces["relevant_valid"]
        filled = valid.sum().clamp(min=1)
        return {
            "relevant_occupancy": valid.float().mean(),
            "relevant_score": (traces["relevant_score"] * valid).sum() / filled,
            "attention_on_relevant": traces["attention"][..., self.short_term:].sum(-1).mean(),
        }

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, short_term={self.short_term}, "
                f"relevant={self.relevant}, screening={self.screening.name}")


@register("relstm")
class ReLSTM(_RelevancyScreening):
    __doc__ = f"""Relevancy-screening LSTM (ReLLSTM, Kerg et al. 2020), on an LSTM base.

    The base recurrence is :math:`(h_t, c_t) = \\mathrm{{LSTMCell}}(x_t, (s_{{t-1}}, c_{{t-1}}))`.
    {_RelevancyScreening.__doc__}
    Args:
        input_size: features of each input.
        hidden_size: size of :math:`h`, :math:`s` and each memory slot.
        short_term: ν, the length of the short-term buffer (paper: 5 for RL, 10 for copy).
        relevant: ρ, the capacity of the relevant set (paper: 5 for RL, 10 for copy).
        forget_bias: initial forget-gate bias of the LSTM base (see :class:`~rlmem.cells.LSTM`).
        screening: :attr:`Screening.algorithm1` (the paper's; R starts with the first ρ
            states) or the ablation :attr:`Screening.normalised`; a member or its name.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``, the macro-states :math:`s_t`
        - state: :class:`ReLSTMState`; traces ``attention`` ``(T, B, ν+ρ)`` over ``[S, R]``,
          ``slot_time`` ``(T, B, ν+ρ)`` (episode step each slot holds, -1 when empty),
          ``relevant_valid`` and ``relevant_score`` ``(T, B, ρ)``
    """

    state_type = ReLSTMState

    def __init__(self, input_size: int, hidden_size: int, *, short_term: int = 5,
                 relevant: int = 5, forget_bias: float = 1.0,
                 screening: Screening = Screening.algorithm1) -> None:
        super().__init__(input_size, hidden_size, short_term=short_term, relevant=relevant,
                         screening=screening)
        self.base = LSTMBase(input_size, hidden_size, forget_bias)

    def base_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        return self.base.doubled()

    def base_step(self, z: Tensor, state: ReLSTMState) -> tuple[Tensor, dict[str, Tensor]]:
        h, c = self.base.step_doubled(z, state.c)
        return h, {"c": c}


@register("relrnn")
class ReLRNN(_RelevancyScreening):
    __doc__ = f"""Relevancy-screening RNN (ReLRNN, Kerg et al. 2020), on a simple-RNN base.

    The base recurrence is Eq. 1, :math:`h_t = \\phi(V s_{{t-1}} + U x_t + b)`, with φ tanh
    (copy, Table 5) or modReLU (denoise and sequential MNIST, Tables 6 and 8),
    :math:`\\mathrm{{modReLU}}(z)_i = \\mathrm{{sign}}(z_i) \\max(|z_i| + b^m_i, 0)` with a
    learned bias :math:`b^m` of its own (:class:`~rlmem.cells.modrelu.ModReLU`; Eq. 1's
    :math:`b` is kept, a shift of z before the magnitude is taken). Only tanh runs through
    the chunk engine; modReLU runs :meth:`step` under autograd, several times slower to train.
    {_RelevancyScreening.__doc__}
    Args:
        input_size: features of each input.
        hidden_size: size of :math:`h`, :math:`s` and each memory slot.
        short_term: ν, the length of the short-term buffer.
        relevant: ρ, the capacity of the relevant set.
        nonlinearity: φ, :attr:`BaseNonlinearity.tanh` or :attr:`BaseNonlinearity.modrelu`; a
            member or its name.
        screening: :attr:`Screening.algorithm1` (the paper's) or the ablation
            :attr:`Screening.normalised`; a member or its name.

    Shapes:
        - x: ``(T, B, input_size)``; resets: ``(T, B)``
        - output: ``(T, B, hidden_size)``; state: :class:`ReLRNNState`; traces as ReLSTM
    """

    state_type = ReLRNNState

    def __init__(self, input_size: int, hidden_size: int, *, short_term: int = 5,
                 relevant: int = 5, nonlinearity: BaseNonlinearity = BaseNonlinearity.tanh,
                 screening: Screening = Screening.algorithm1) -> None:
        super().__init__(input_size, hidden_size, short_term=short_term, relevant=relevant,
                         screening=screening)
        self.nonlinearity = enum_option(BaseNonlinearity, nonlinearity, "ReLRNN",
                                        "nonlinearity")
        self.input_map = nn.Linear(input_size, hidden_size)  # U and b
        self.recurrent_map = nn.Linear(hidden_size, hidden_size, bias=False)  # V
        if self.nonlinearity is BaseNonlinearity.modrelu:
            self.modrelu = ModReLU(hidden_size)

    def runs_engine(self) -> bool:
        return super().runs_engine() and self.nonlinearity is BaseNonlinearity.tanh

    def base_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        if self.nonlinearity is BaseNonlinearity.modrelu:
            return self.input_map.weight, self.input_map.bias, self.recurrent_map.weight
        # tanh(V s + U x + b) = 2σ(2V s + 2U x + 2b) - 1
        return (2.0 * self.input_map.weight, 2.0 * self.input_map.bias,
                2.0 * self.recurrent_map.weight)

    def base_step(self, z: Tensor, state: ReLRNNState) -> tuple[Tensor, dict[str, Tensor]]:
        if self.nonlinearity is BaseNonlinearity.modrelu:
            return self.modrelu(z), {}
        return 2.0 * torch.sigmoid(z) - 1.0, {}

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, nonlinearity={self.nonlinearity.name}"

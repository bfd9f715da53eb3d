"""Relevancy screening (Kerg et al., 2020, §2 and Algorithm 1): the base class of ReLSTM and
ReLRNN (:mod:`rlmem.cells.relstm`, :mod:`rlmem.cells.relrnn`), the screening rule and the
fields of the screened memory that both cells' states hold.

Reference: G. Kerg, B. Kanuparthi, A. Goyal, K. Goyette, Y. Bengio, G. Lajoie. "Learning
Long-term Dependencies Using Cognitive Inductive Biases in Self-attention RNNs", 2020.
"""

from __future__ import annotations

import abc
from enum import Enum
from typing import Annotated, Any

import torch
from torch import Tensor
from torch.nn import functional as F

from rlmem.cells._engines import screened
from rlmem.cells._engines.attentive_paths import outside_autocast, wants_engine
from rlmem.cells._engines.weight_cache import prepared
from rlmem.cells.attention import AdditiveAttention, Weights, project
from rlmem.cells.base import Cell, Dims
from rlmem.cells.options import enum_option
from rlmem.cells.time_loop import ScanResult, scan

# The fields of the screened memory, in both cells' states (one alias each, so that both
# NamedTuples declare a field's shape and dtype the same way).
MacroState = Annotated[Tensor, Dims("hidden_size")]
"""The macro-state :math:`s_{t-1}`: the output, and what the recurrence reads, ``(B, H)``."""
EpisodeStep = Annotated[Tensor, Dims(dtype=torch.long)]
"""Steps consumed since the episode started, ``(B,)`` long (labels for figures)."""
ShortTerm = Annotated[Tensor, Dims("short_term", "hidden_size")]
"""The short-term buffer S of the last ν states h, oldest first, ``(B, ν, H)``."""
ShortTermScore = Annotated[Tensor, Dims("short_term")]
"""The attention each buffered state has received so far, ``(B, ν)``."""
ShortTermValid = Annotated[Tensor, Dims("short_term", dtype=torch.bool)]
"""Which buffer slots hold a state, ``(B, ν)`` bool."""
ShortTermTime = Annotated[Tensor, Dims("short_term", dtype=torch.long)]
"""The episode step at which each buffered state was made, ``(B, ν)`` long."""
Relevant = Annotated[Tensor, Dims("relevant", "hidden_size")]
"""The relevant set R, ``(B, ρ, H)``."""
RelevantScore = Annotated[Tensor, Dims("relevant")]
"""The relevance β(i) of each state in R, frozen on entry, ``(B, ρ)``."""
RelevantValid = Annotated[Tensor, Dims("relevant", dtype=torch.bool)]
"""Which slots of R hold a state, ``(B, ρ)`` bool."""
RelevantTime = Annotated[Tensor, Dims("relevant", dtype=torch.long)]
"""The episode step at which each state in R was made, ``(B, ρ)`` long."""

UNIFORM_SHARE = 1.0
"""Normalised screening's relevance of a state that drew exactly its uniform share of
attention (:attr:`Screening.normalised`), and the score an empty slot of R ranks at under it:
only a state above its share enters a free slot."""


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


class Readout(Enum):
    """What the cell emits, and how the macro-state mixes the base state with the read."""

    algorithm1 = "algorithm1"
    r"""Algorithm 1 as written: the cell emits the macro-state :math:`s_t = h_t + \text{read}_t`,
    which the recurrence also reads."""
    authors_code = "authors_code"
    r"""The authors' public code (``RelLSTM`` and ``RelMemRNN`` in the repository of their
    arXiv:2006.09471): the cell emits the base state :math:`h_t`, and the recurrence reads
    :math:`s_t = \tfrac12 (h_t + \text{read}_t)`. The read then reaches the output only
    through the recurrence, which can gate it."""


class ResetRule(Enum):
    """When the screened memory and the recurrent state start afresh."""

    algorithm1 = "algorithm1"
    """Algorithm 1 as written: S and R hold the states of the episode so far, however the
    caller cuts it into calls, and an episode start resets the whole state where it falls."""
    authors_code = "authors_code"
    r"""The authors' RL code (``RelLSTM.forward(x, (h, c), reset)`` in the ``minigrid-rl``
    branch of their repository, driven by ``torch-ac``'s PPO): every call starts with S and R
    empty (their ``reset=True``: their rollout and evaluation pass it at every step, their
    update at each chunk's first step), an episode start resets :math:`s` and :math:`c` only
    at a call's first step (after it their cell reads neither the masked ``(h, c)`` it is
    given nor the episode ends: S, R, :math:`s` and :math:`c` run on across them), and a call
    hands on the base state :math:`h` of its last step as the macro-state (their cell returns
    ``(h, c)``). A call of one step, as our PPO and evaluation act, is then exactly a step of
    the base recurrence on :math:`s_{t-1} = h_{t-1}`, with no attention; a call of a BPTT
    chunk attends over the chunk's own states from its start. Needs
    ``readout=authors_code`` (with :attr:`Readout.algorithm1`'s :math:`s = h + \text{read}`
    a step alone would recur on :math:`2h`). A chunked run no longer equals one call: the
    calls are the rule."""


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


class RelevancyScreening(Cell):
    r"""Relevancy screening on a recurrent base; subclasses give the base recurrence and the
    state: its base fields, then the screened memory (:data:`EpisodeStep` and the fields after).

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

    The reference loop is :func:`~rlmem.cells.time_loop.scan` over :meth:`step`. The cells' engine
    (:mod:`rlmem.cells._engines.screened`) runs a chunk without autograd inside the loop, with a
    hand-written backward, in the parameters' dtype even under autocast, with either
    screening; and a rollout's single steps without autograd through a compiled step
    (Algorithm 1's screening). The engine computes in the doubled form of
    :mod:`rlmem.cells.attention` (:math:`\tanh(x) = 2\sigma(2x) - 1`); :meth:`step` is the
    textbook form, the reference it is tested against, and runs for a rollout's few steps
    otherwise, for parameters other than float32 and float64, and for the options the engine
    does not implement (``readout=authors_code``, ReLRNN's ``modrelu``), which train through
    autograd step by step, several times slower.

    ``reset_rule=authors_code`` (:class:`ResetRule`) runs the authors' RL code path instead:
    the memory lasts one call (:meth:`fast_scan`, the one hook of the time loop, applies it).
    """

    def __init__(self, input_size: int, hidden_size: int, *, short_term: int = 5,
                 relevant: int = 5, screening: Screening = Screening.algorithm1,
                 readout: Readout = Readout.algorithm1,
                 reset_rule: ResetRule = ResetRule.algorithm1) -> None:
        super().__init__(input_size, hidden_size)
        if short_term < 1 or relevant < 1:
            raise ValueError(f"{type(self).__name__}: need short_term ≥ 1 and relevant ≥ 1, got "
                             f"short_term={short_term}, relevant={relevant}")
        self.short_term = short_term
        self.relevant = relevant
        self.screening = enum_option(Screening, screening, type(self).__name__, "screening")
        self.readout = enum_option(Readout, readout, type(self).__name__, "readout")
        self.reset_rule = enum_option(ResetRule, reset_rule, type(self).__name__, "reset_rule")
        if self.reset_rule is ResetRule.authors_code and self.readout is not Readout.authors_code:
            raise ValueError(f"{type(self).__name__}: reset_rule=authors_code is the authors' code "
                             "path and needs its read-out, readout=authors_code (with "
                             f"readout={self.readout.name} a step without attention would recur "
                             "on 2h); set both, as +recipe=kerg2020_code does")
        self.attention = AdditiveAttention(hidden_size)

    def runs_engine(self) -> bool:
        """Whether the chunk engine (:func:`rlmem.cells._engines.screened.screened_scan`)
        implements this cell's options (Algorithm 1's read-out and a tanh or LSTM base); else
        :meth:`step` runs."""
        return self.readout is Readout.algorithm1

    # --- the base recurrence, in the doubled form of rlmem.cells.attention ------------------

    @abc.abstractmethod
    def base_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """The base's input weight ``(G, input)``, bias ``(G,)`` and recurrent weight
        ``(G, H)`` for the engine, tanh pre-activations doubled; ``G`` is the size of its
        pre-activation."""

    @abc.abstractmethod
    def project_input(self, x: Tensor) -> Tensor:
        """The base's input terms (its input weight and bias applied), all steps at once:
        :meth:`step` receives ``project_input(x)[t]``, ``(B, G)``."""

    @abc.abstractmethod
    def base_step(self, x_t: Tensor, state: Any) -> tuple[Tensor, dict[str, Tensor]]:
        """``h_t`` and the updated base fields (``c`` for the LSTM) from the base's input terms
        ``x_t`` (``(B, G)``) and the previous macro-state ``state.s``."""

    def doubled_weights(self) -> tuple[Tensor, Tensor, Weights]:
        """What the engine reads: the transposed input weight and the bias of its input terms,
        and the recurrent :class:`~rlmem.cells.attention.Weights`, in the doubled form of
        :mod:`rlmem.cells.attention`; kept between calls without autograd
        (:func:`~rlmem.cells._engines.weight_cache.prepared`)."""
        def build() -> tuple[Tensor, Tensor, Weights]:
            w_in, b_in, w_rec = self.base_weights()
            query, query_bias, key, score = self.attention.doubled()
            return (w_in.t().contiguous(), b_in,
                    Weights(torch.cat([w_rec, query]), key, score, query_bias))
        return prepared(self, build)

    def fast_scan(self, x: Tensor, state: Any, resets: Tensor) -> ScanResult | None:
        """The chunk through the first path that takes it: under autocast, the same paths in
        the parameters' dtype with autocast off; the chunk engine
        (:func:`~rlmem.cells._engines.screened.screened_scan`: chunks of
        :data:`~rlmem.cells._engines.attentive_paths.STEP_PATH_STEPS` steps or more, or under
        autograd, or any chunk the Triton kernels take but the rollout step's:
        :func:`~rlmem.cells._engines.screened.kernels_take_short_chunk`; float32 and float64;
        both screenings; :meth:`runs_engine`); the compiled
        rollout step (:func:`~rlmem.cells._engines.screened.screened_step`: one step without
        autograd, Algorithm 1's screening); else ``None``: :meth:`step` runs. With
        ``reset_rule=authors_code``, :meth:`authors_call`."""
        if self.reset_rule is ResetRule.authors_code:
            return self.authors_call(x, state, resets)
        escaped = outside_autocast(self._scan, x, state, resets, self.attention.score.weight.dtype)
        if escaped is not None:
            return escaped
        if not self.runs_engine():
            return None
        w_in, bias, weights = self.doubled_weights()
        xp = project(x, w_in, bias)
        fields = (state.s, getattr(state, "c", None), state.short, state.short_score,
                  state.short_valid, state.short_time, state.relevant, state.relevant_score,
                  state.relevant_valid, state.relevant_time, state.t, resets)
        result = None
        normalised = self.screening is Screening.normalised
        if wants_engine(x.shape[0], (xp, *weights, *state)) or screened.kernels_take_short_chunk(
                xp, state.s.shape[1], state.short.shape[1] + state.relevant.shape[1], normalised):
            result = screened.screened_scan(xp, weights, *fields,
                                            uniform_share=UNIFORM_SHARE if normalised else None)
        if result is None and not normalised:
            result = screened.screened_step(xp, weights, *fields)
        if result is None:
            return None
        base_fields = {"c": result.c} if result.c is not None else {}
        new_state = state._replace(
            s=result.y[-1], t=result.t, **base_fields,
            short=result.short, short_score=result.short_score, short_valid=result.short_valid,
            short_time=result.short_time, relevant=result.relevant,
            relevant_score=result.relevant_score, relevant_valid=result.relevant_valid,
            relevant_time=result.relevant_time)
        return ScanResult(result.y, new_state, result.traces)

    def authors_call(self, x: Tensor, state: Any, resets: Tensor) -> ScanResult:
        """One call under :attr:`ResetRule.authors_code`: ``scan(step)`` from ``state`` with the
        screened memory emptied (``t`` and the fields after it), the episode starts of the
        call's first step alone applied, and the last step's output (:math:`h`, under
        ``readout=authors_code``) handed on as the macro-state :math:`s`.

        Shapes: as :meth:`~rlmem.cells.base.Cell._scan`.
        """
        memory = type(state)._fields.index("t")
        state = state._make(value if index < memory else torch.zeros_like(value)
                            for index, value in enumerate(state))
        first = torch.zeros_like(resets)
        first[0] = resets[0]
        result = scan(self.step, self.project_input(x), state, first)
        return result._replace(state=result.state._replace(s=result.output[-1]))

    def step(self, x_t: Tensor, state: Any) -> tuple[Tensor, Any, dict[str, Tensor]]:
        """One step of the docstring's equations; ``x_t`` is a step of :meth:`project_input`,
        ``(B, G)``."""
        h, base_fields = self.base_step(x_t, state)
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

        slots = torch.cat([short, relevant], dim=1)
        valid = torch.cat([short_valid, relevant_valid], dim=1)
        weights_t, read = self.attention(state.s, slots, valid)
        if self.readout is Readout.algorithm1:
            s = output = h + read
        else:
            s, output = 0.5 * (h + read), h
        received = weights_t[:, :self.short_term].detach()
        if normalised:  # relative to the uniform share 1/|M_t|, averaged over the ν steps
            held = valid.sum(dim=1, keepdim=True).to(received.dtype)
            received = received * (held / self.short_term)
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
        return output, new_state, traces

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
                f"relevant={self.relevant}, screening={self.screening.name}, "
                f"readout={self.readout.name}, reset_rule={self.reset_rule.name}")

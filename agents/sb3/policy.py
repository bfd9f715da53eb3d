"""``MemoryPolicy``: any rlmem cell as the recurrent core of sb3-contrib's RecurrentPPO.

>>> from sb3_contrib import RecurrentPPO
>>> model = RecurrentPPO(MemoryPolicy, "CartPole-v1",
...                      policy_kwargs=dict(memory="relstm", memory_kwargs=dict(hidden_size=32)))
... # doctest: +SKIP

The policy is a :class:`~sb3_contrib.common.recurrent.policies.RecurrentActorCriticPolicy`
whose ``lstm_actor`` / ``lstm_critic`` are :class:`~rlmem.agents.sb3.memory.PackedMemory`
modules: the cell's whole state travels through RecurrentPPO packed into its ``(h, c)``
tensors, and episode starts reach the cell as its ``resets``.

Auxiliary losses (SA-RNN's update budget, TARNN's Ω) reach the PPO loss without changing
RecurrentPPO: :meth:`MemoryPolicy.evaluate_actions` returns the values through
:func:`attach_loss`, an identity whose backward also sends a gradient of 1 into the cells' aux
loss. ``loss.backward()`` in ``RecurrentPPO.train()`` therefore computes the gradient of
``loss + aux``, and its ``clip_grad_norm_`` applies to the sum, exactly as if ``train()`` had
added the term. (The reported ``train/loss`` does not include it; the aux losses are logged
separately by :class:`~rlmem.agents.sb3.callback.MemoryCallback`.)
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
from gymnasium import spaces
from sb3_contrib.common.recurrent.policies import RecurrentActorCriticPolicy
from sb3_contrib.common.recurrent.type_aliases import RNNStates
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import (
    BaseFeaturesExtractor,
    CombinedExtractor,
    FlattenExtractor,
    NatureCNN,
)
from stable_baselines3.common.type_aliases import Schedule
from torch import Tensor, nn

from rlmem.agents.sb3.errors import PolicyArgumentError
from rlmem.agents.sb3.memory import PackedMemory
from rlmem.cells import Aux, get_cell_class, hyperparameters, make_cell

SB3_DEFAULT_HIDDEN_SIZE = 256
"""sb3-contrib's default ``lstm_hidden_size``. A :class:`MemoryPolicy` that sets no size uses it
too, so swapping ``MlpLstmPolicy`` for ``MemoryPolicy`` keeps the memory's size. (rlmem's own
configs default to 64, :data:`rlmem.cells.registry.DEFAULT_HIDDEN_SIZE`.)"""

SB3_CONTRIB_INIT: dict[str, float] = {"forget_bias": 0.0}
"""How sb3-contrib's ``nn.LSTM`` starts, as cell hyperparameters: torch's initialisation, whose
forget-gate bias is centred on 0 (rlmem's cells start it at 1, the MiniGrid memory recipe).

A :class:`MemoryPolicy` gives each entry to every cell that takes it (``lstm``, and the LSTM
bases of ``relstm`` and ``memlstm``) unless ``memory_kwargs`` sets it, so that a plain swap of
``MlpLstmPolicy`` for ``MemoryPolicy`` trains sb3-contrib's model, not a different one. The
difference is measurable: on sb3-contrib's CartPole-without-velocities test, the evaluations
at 40k-50k steps returned more than 450 in 18 of 24 for sb3-contrib's LSTM (seeds 1-8), 21 of
24 for rlmem's lstm started at 0, and 7 of 15 started at 1 (seeds 1-5); see
``tests/agents/test_sb3_contrib_lstm.py``. rlmem's Hydra runs (``agent=sb3``) pass their config's
value, so they keep 1. (The cell sets the forget block of both its biases to exactly 0, where
torch draws each uniformly in ``±1/sqrt(hidden_size)``: the same mean.)"""


def sb3_contrib_init(memory: str) -> dict[str, float]:
    """The entries of :data:`SB3_CONTRIB_INIT` that the registered cell ``memory`` takes."""
    accepted = hyperparameters(get_cell_class(memory))
    return {key: value for key, value in SB3_CONTRIB_INIT.items() if key in accepted}


_NO_LSTM_KWARG = {
    "input_size": "the cell reads the features extractor's output, whose size decides it",
    "hidden_size": "use lstm_hidden_size or memory_kwargs={'hidden_size': ...}",
    "num_layers": "use n_lstm_layers or memory_kwargs={'num_layers': ...}",
    "bias": "rlmem cells always have biases; their initialisation is a cell hyperparameter "
            "(e.g. memory_kwargs={'forget_bias': 0.0} for torch's LSTM init)",
    "batch_first": "not needed: the policy lays out RecurrentPPO's sequences for the cell",
    "bidirectional": "no rlmem equivalent: a policy's memory must be causal",
    "proj_size": "no rlmem equivalent; set memory_kwargs={'hidden_size': ...} or add a layer "
                 "with net_arch",
    "device": "use RecurrentPPO(..., device=...)",
    "dtype": "no rlmem equivalent: the cells take the policy's dtype",
}
"""``nn.LSTM`` arguments that ``lstm_kwargs`` cannot carry, and what to use instead."""


def translate_lstm_kwargs(memory_kwargs: dict[str, Any] | None,
                          lstm_hidden_size: int | None = None,
                          n_lstm_layers: int | None = None,
                          lstm_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cell's ``memory_kwargs``, with sb3-contrib's LSTM arguments translated in.

    ``lstm_hidden_size`` is the cell's ``hidden_size``, ``n_lstm_layers`` its ``num_layers``
    (a :class:`~rlmem.cells.Stacked` cell) and ``lstm_kwargs={"dropout": p}`` its
    ``dropout`` between layers. Without ``lstm_hidden_size`` or ``memory_kwargs["hidden_size"]``
    the size is :data:`SB3_DEFAULT_HIDDEN_SIZE`, sb3-contrib's default.

    Raises:
        ValueError: an argument is given both ways (e.g. ``lstm_hidden_size`` and
            ``memory_kwargs["hidden_size"]``), ``memory_kwargs`` sets ``input_size``, or
            ``lstm_kwargs`` has an ``nn.LSTM`` argument that does not apply to a cell (the
            message says what to use instead).
        TypeError: ``lstm_kwargs`` has a key that ``nn.LSTM`` does not take either.
    """
    resolved = dict(memory_kwargs or {})
    if "input_size" in resolved:
        raise ValueError(f"memory_kwargs must not set input_size: {_NO_LSTM_KWARG['input_size']}")
    translated: dict[str, tuple[str, Any]] = {}
    if lstm_hidden_size is not None:
        translated["hidden_size"] = ("lstm_hidden_size", lstm_hidden_size)
    if n_lstm_layers is not None:
        translated["num_layers"] = ("n_lstm_layers", n_lstm_layers)
    for key, value in (lstm_kwargs or {}).items():
        if key == "dropout":
            translated["dropout"] = ("lstm_kwargs['dropout']", value)
        elif key in _NO_LSTM_KWARG:
            raise ValueError(f"lstm_kwargs[{key!r}] does not apply to an rlmem cell: "
                             f"{_NO_LSTM_KWARG[key]}")
        else:
            raise TypeError(f"lstm_kwargs[{key!r}] is not an nn.LSTM argument; lstm_kwargs "
                            f"takes 'dropout' (the cell's own arguments go in memory_kwargs)")
    for key, (origin, value) in translated.items():
        if key in resolved:
            raise ValueError(f"{origin}={value!r} and memory_kwargs[{key!r}]="
                             f"{resolved[key]!r} both set the cell's {key}: pass only one")
        resolved[key] = value
    resolved.setdefault("hidden_size", SB3_DEFAULT_HIDDEN_SIZE)
    return resolved


class _AttachLoss(torch.autograd.Function):
    """Identity on ``carrier``; in backward, gives ``loss`` the gradient 1."""

    @staticmethod
    def forward(ctx: Any, carrier: Tensor, loss: Tensor) -> Tensor:
        ctx.loss_shape, ctx.loss_dtype = loss.shape, loss.dtype
        return carrier.clone()

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, Tensor]:
        return grad, torch.ones(ctx.loss_shape, dtype=ctx.loss_dtype, device=grad.device)


def attach_loss(carrier: Tensor, loss: Tensor | float) -> Tensor:
    """``carrier``, unchanged, but any backward pass through it also backpropagates ``loss``.

    If a scalar ``L`` depends on ``carrier`` then ``L.backward()`` accumulates
    ``∇L + ∇loss``: the gradient of ``L + loss``. This is how a term gets into a loss that is
    summed somewhere we do not control (``RecurrentPPO.train()``).

    Shapes:
        - carrier: any; loss: ``()``; returns the shape of ``carrier``
    """
    if not isinstance(loss, Tensor) or not loss.requires_grad:
        return carrier
    return _AttachLoss.apply(carrier, loss)


class MemoryPolicy(RecurrentActorCriticPolicy):
    """RecurrentPPO's actor-critic policy with an rlmem cell in place of ``nn.LSTM``.

    Takes every argument of sb3-contrib's ``RecurrentActorCriticPolicy``, with the same meaning,
    plus ``memory`` and ``memory_kwargs``, which choose the cell. sb3-contrib's LSTM arguments
    become the cell's (:func:`translate_lstm_kwargs`), and what sb3-contrib leaves at its default
    is sb3-contrib's default here too: a plain swap of ``MlpLstmPolicy`` for ``MemoryPolicy``
    gives an LSTM cell of sb3-contrib's size, 256, started as sb3-contrib starts its
    ``nn.LSTM`` (forget-gate bias 0, :data:`SB3_CONTRIB_INIT`, for every cell that has one).

    Args:
        observation_space, action_space, lr_schedule, net_arch, activation_fn, ortho_init,
            use_sde, log_std_init, full_std, use_expln, squash_output,
            features_extractor_class, features_extractor_kwargs, share_features_extractor,
            normalize_images, optimizer_class, optimizer_kwargs: as in sb3-contrib.
            ``ortho_init`` re-initialises the extractor and heads, never the cells, which keep
            their own (paper) initialisation.
        lstm_hidden_size: the cell's ``hidden_size`` (``None``: ``memory_kwargs``' or else
            256, sb3-contrib's default).
        n_lstm_layers: stacks that many cells (the cell's ``num_layers``; ``None``: 1).
        shared_lstm: the critic reads the actor's cell output (detached), as in sb3-contrib.
        enable_critic_lstm: the critic has its own cell (the default); with both this and
            ``shared_lstm`` false, the critic is feed-forward.
        lstm_kwargs: ``{"dropout": p}``, the dropout between stacked cells; the other
            ``nn.LSTM`` arguments do not apply and raise an error that says what to use.
        memory: registered cell name (``rlmem.cells.CELLS``).
        memory_kwargs: the cell's ``hidden_size``, ``num_layers``, ``dropout`` and
            hyperparameters; the input size is the features extractor's output size. A
            hyperparameter of :data:`SB3_CONTRIB_INIT` it does not set takes sb3-contrib's
            value (e.g. ``forget_bias=1.0`` for rlmem's own LSTM initialisation).

    Raises:
        KeyError: unknown ``memory``. TypeError: unknown ``memory_kwargs`` or ``lstm_kwargs``
            key.
        PolicyArgumentError: ``shared_lstm`` together with ``enable_critic_lstm``, or with an
            unshared features extractor: a :class:`ValueError` that is also the
            ``AssertionError`` sb3-contrib raises there
            (:class:`~rlmem.agents.sb3.errors.PolicyArgumentError`).
        ValueError: an LSTM argument given both ways or that does not apply
            (:func:`translate_lstm_kwargs`).
    """

    # sb3-contrib types these as nn.LSTM, but only ever hands them to _process_sequence (and
    # reads num_layers/hidden_size for its buffers), which this class overrides to run a cell.
    lstm_actor: PackedMemory  # type: ignore[assignment]
    lstm_critic: PackedMemory | None  # type: ignore[assignment]

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        lr_schedule: Schedule,
        net_arch: list[int] | dict[str, list[int]] | None = None,
        activation_fn: type[nn.Module] = nn.Tanh,
        ortho_init: bool = True,
        use_sde: bool = False,
        log_std_init: float = 0.0,
        full_std: bool = True,
        use_expln: bool = False,
        squash_output: bool = False,
        features_extractor_class: type[BaseFeaturesExtractor] = FlattenExtractor,
        features_extractor_kwargs: dict[str, Any] | None = None,
        share_features_extractor: bool = True,
        normalize_images: bool = True,
        optimizer_class: type[torch.optim.Optimizer] = torch.optim.Adam,
        optimizer_kwargs: dict[str, Any] | None = None,
        lstm_hidden_size: int | None = None,
        n_lstm_layers: int | None = None,
        shared_lstm: bool = False,
        enable_critic_lstm: bool = True,
        lstm_kwargs: dict[str, Any] | None = None,
        memory: str = "lstm",
        memory_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if shared_lstm and enable_critic_lstm:
            raise PolicyArgumentError("shared_lstm=True needs enable_critic_lstm=False: choose a "
                                      "shared, a separate or no recurrent critic")
        if shared_lstm and not share_features_extractor:
            raise PolicyArgumentError("shared_lstm=True needs share_features_extractor=True")
        get_cell_class(memory)  # an unknown name fails here, listing the valid ones
        self.memory = memory
        # Saved by _get_constructor_parameters in place of the LSTM arguments, so a loaded
        # policy rebuilds the same cell whatever the defaults are then.
        self.memory_kwargs = translate_lstm_kwargs(memory_kwargs, lstm_hidden_size,
                                                   n_lstm_layers, lstm_kwargs)
        self.shared_lstm = shared_lstm
        self.enable_critic_lstm = enable_critic_lstm
        self._diagnostics: defaultdict[str, list[Tensor]] = defaultdict(list)
        # Skip RecurrentActorCriticPolicy.__init__, which would build nn.LSTMs; the cells are
        # built in _build_mlp_extractor, once the features size is known and before the
        # optimizer is created.
        ActorCriticPolicy.__init__(
            self, observation_space, action_space, lr_schedule, net_arch, activation_fn,
            ortho_init, use_sde, log_std_init, full_std, use_expln, squash_output,
            features_extractor_class, features_extractor_kwargs, share_features_extractor,
            normalize_images, optimizer_class, optimizer_kwargs)

    def _make_memory(self) -> PackedMemory:
        # The initialisation only matters for a new policy: a loaded one gets its weights after.
        kwargs = {**sb3_contrib_init(self.memory), **self.memory_kwargs}
        return PackedMemory(make_cell(self.memory, input_size=self.features_dim, **kwargs))

    def _build_mlp_extractor(self) -> None:
        self.lstm_actor = self._make_memory()
        self.lstm_critic = self._make_memory() if self.enable_critic_lstm else None
        self.lstm_output_dim = self.lstm_actor.output_size
        self.critic = (nn.Linear(self.features_dim, self.lstm_output_dim)
                       if not (self.shared_lstm or self.enable_critic_lstm) else None)
        # For predict(): zeros of this shape per environment unpack to the initial state.
        self.lstm_hidden_state_shape = (self.lstm_actor.num_layers, 1, self.lstm_actor.hidden_size)
        super()._build_mlp_extractor()

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(memory=self.memory, memory_kwargs=self.memory_kwargs,
                    shared_lstm=self.shared_lstm, enable_critic_lstm=self.enable_critic_lstm,
                    share_features_extractor=self.share_features_extractor)
        return data

    @staticmethod
    def _process_sequence(  # type: ignore[override]
        # sb3-contrib's hook takes an nn.LSTM (and annotates its result as two tensors: it
        # returns the output and the (h, c) pair, as here); ours runs the PackedMemory.
        features: Tensor, lstm_states: tuple[Tensor, Tensor], episode_starts: Tensor,
        lstm: PackedMemory,
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """sb3-contrib's hook, with the reset done by the cell (see :class:`PackedMemory`).

        Shapes:
            - features: ``(n_seq * T, features_dim)``; episode_starts: ``(n_seq * T,)``
            - lstm_states: ``(1, n_seq, hidden)`` each; returns the latent
              ``(n_seq * T, output_size)`` and the packed states after the last step
        """
        output, states, _ = lstm(features, lstm_states, episode_starts)
        return output, states

    def evaluate_actions(  # type: ignore[override]
        # sb3-contrib's own signature: it adds the states to ActorCriticPolicy's, and its
        # entropy may be None (as SB3 annotates a distribution's entropy).
        self, obs: Tensor | dict[str, Tensor], actions: Tensor, lstm_states: RNNStates,
        episode_starts: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """As sb3-contrib's, plus the cells' aux losses (through the values) and diagnostics.

        Shapes:
            - obs: ``(n_seq * T, *obs_shape)``; actions: ``(n_seq * T, *action_shape)``
            - episode_starts: ``(n_seq * T,)``; lstm_states: ``(1, n_seq, hidden)`` each
            - returns values ``(n_seq * T, 1)``, log-probabilities and entropies
              ``(n_seq * T,)``
        """
        features = self.extract_features(obs)
        if self.share_features_extractor:
            pi_features = vf_features = features
        else:
            pi_features, vf_features = features
        latent_pi, _, aux_pi = self.lstm_actor(pi_features, lstm_states.pi, episode_starts)
        auxes = {"actor": aux_pi}
        if self.lstm_critic is not None:
            latent_vf, _, auxes["critic"] = self.lstm_critic(vf_features, lstm_states.vf,
                                                             episode_starts)
        elif self.shared_lstm:
            latent_vf = latent_pi.detach()
        else:
            assert self.critic is not None  # built when the critic has no recurrence
            latent_vf = self.critic(vf_features)

        latent_pi = self.mlp_extractor.forward_actor(latent_pi)
        latent_vf = self.mlp_extractor.forward_critic(latent_vf)
        distribution = self._get_action_dist_from_latent(latent_pi)
        log_prob = distribution.log_prob(actions)
        aux_loss = sum((aux.total_loss() for aux in auxes.values()), 0.0)
        values = attach_loss(self.value_net(latent_vf), aux_loss)
        self._record(auxes)
        return values, log_prob, distribution.entropy()

    def _record(self, auxes: dict[str, Aux]) -> None:
        # The actor's cell is "the" memory: its keys match our PPO's progress.csv columns.
        total = 0.0
        for role, aux in auxes.items():
            prefix = "memory/" if role == "actor" else f"memory/{role}/"
            for key, value in aux.diagnostics.items():
                self._diagnostics[f"{prefix}{key}"].append(value.detach().float())
            for key, value in aux.losses.items():
                self._diagnostics[f"{prefix}loss_{key}"].append(value.detach().float())
            loss = aux.total_loss()
            total += float(loss.detach()) if isinstance(loss, Tensor) else float(loss)
        self._diagnostics["loss/memory_aux"].append(torch.tensor(total))

    def pop_diagnostics(self) -> dict[str, float]:
        """Means over the minibatches since the last call of the cells' diagnostics and aux
        losses: ``memory/<name>`` (the actor's cell), ``memory/critic/<name>`` (the critic's),
        ``memory/[critic/]loss_<name>`` and their sum ``loss/memory_aux``.
        """
        means = {key: float(torch.stack(values).mean()) for key, values in
                 self._diagnostics.items()}
        self._diagnostics.clear()
        return means

    def anneal(self, progress: float) -> None:
        """Forward training progress in ``[0, 1]`` to every cell (e.g. SA-RNN's slope)."""
        for memory in (self.lstm_actor, self.lstm_critic):
            if memory is not None:
                memory.cell.anneal(progress)


class CnnMemoryPolicy(MemoryPolicy):
    """:class:`MemoryPolicy` for image observations; pass a ``features_extractor_class``
    suited to the image size (SB3's default ``NatureCNN`` needs at least 36×36 pixels; for
    MiniGrid's 7×7 views use :class:`~rlmem.agents.sb3.extractor.MiniGridExtractor`)."""

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space,
                 lr_schedule: Schedule, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", NatureCNN)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)


class MultiInputMemoryPolicy(MemoryPolicy):
    """:class:`MemoryPolicy` for ``Dict`` observations (SB3's ``CombinedExtractor`` by
    default; MiniGrid's image + mission: :class:`~rlmem.agents.sb3.extractor.MiniGridExtractor`).
    """

    def __init__(self, observation_space: spaces.Space, action_space: spaces.Space,
                 lr_schedule: Schedule, **kwargs: Any) -> None:
        kwargs.setdefault("features_extractor_class", CombinedExtractor)
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

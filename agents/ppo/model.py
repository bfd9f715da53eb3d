"""The recurrent actor-critic of our PPO: field encoders, any registered memory cell, two heads."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import torch
from gymnasium import spaces
from torch import Tensor, nn

from rlmem.agents.blocked_linear import Linear, blocked_products
from rlmem.agents.ppo.critic_memory import pair_states, split_state
from rlmem.agents.ppo.heads import ActionHead, make_action_head
from rlmem.agents.ppo.observation import (
    check_observation_space,
    field_encoder,
    observation_fields,
)
from rlmem.cells import Aux, Cell, State, make_cell_from_config, onednn_products
from rlmem.cells import compiled_lstm as compiled_lstm_chunks

RESERVED_NAMES = frozenset({"memory", "critic_memory", "actor", "critic", "action"})
"""The model's own parts; an observation field of one of these names gets another module name."""


def check_spaces(observation_space: spaces.Space[Any], action_space: spaces.Space[Any],
                 grid_encoding: str, discrete_encoding: str) -> None:
    """Raise a :class:`ValueError` unless :class:`ActorCritic` can encode every field of
    ``observation_space`` (feeding its memory something) and has a head for ``action_space``.
    Nothing is allocated."""
    check_observation_space(observation_space, grid_encoding, discrete_encoding)
    make_action_head(action_space)


class PolicyOutput(NamedTuple):
    """What :meth:`ActorCritic.forward` returns."""

    action_params: Tensor
    """The actor's output, ``(T, B, head.num_params)``: logits (Discrete, MultiDiscrete) or
    the Gaussian's mean (Box)."""
    value: Tensor
    """State values, ``(T, B)``."""
    state: State
    """The memory state after the last step."""
    aux: Aux
    """The memory cell's auxiliary losses, diagnostics and traces (with a separate critic
    memory, the critic cell's too: its losses added, its diagnostics and traces prefixed
    ``critic/``)."""
    head: ActionHead
    """The action head that reads :attr:`action_params` (samples, log-probabilities)."""


def _init_linear(module: nn.Module) -> None:
    # rl-starter-files: unit-norm rows, zero bias, so initial logits and values are small.
    if isinstance(module, nn.Linear):
        module.weight.data.normal_(0, 1)
        module.weight.data /= module.weight.data.pow(2).sum(1, keepdim=True).sqrt()
        module.bias.data.fill_(0)


class ActorCritic(nn.Module):
    """Field encoders -> memory cell -> [cell output, after-memory fields] -> actor and critic.

    With ``shared_memory=False`` the critic has a memory cell of its own, of the same config
    (``critic_memory``), reading the same encoded fields, as sb3-contrib's
    ``enable_critic_lstm`` gives its critic an LSTM of its own: the value loss then trains the
    critic's cell and the encoders, never the actor's cell, and the policy loss never the
    critic's. The state is then the pair of the two cells' states, as one flat NamedTuple
    (:mod:`rlmem.agents.ppo.critic_memory`), so it travels wherever a single cell's does.

    Each observation field gets its encoder by its space's type
    (:func:`rlmem.agents.ppo.observation.field_encoder`). The memory reads the fields' features
    concatenated; fields visible at every step (MiniGrid's mission) join after the memory, as in
    rl-starter-files. Each encoder is a submodule named after its field, so a MiniGrid model's
    parameters are ``image.*``, ``mission.*``, ``memory.*``, ``actor.*``, ``critic.*``, as in
    every checkpoint since rlmem 0.1. The action head follows the action space
    (:func:`rlmem.agents.ppo.heads.make_action_head`); the categorical one has no parameters.

    Args:
        observation_space: any space :func:`~rlmem.agents.ppo.observation.check_observation_space`
            accepts, e.g. a MiniGrid Dict with ``image`` and optionally ``mission``
            (:class:`rlmem.envs.MiniGridObservation`).
        action_space: Discrete, MultiDiscrete or Box; an int ``n`` means ``Discrete(n)``.
        memory: a memory config (``name``, ``hidden_size``, the cell's hyperparameters).
        head_size: hidden units of the actor and critic MLPs.
        grid_encoding: how MiniGrid's grid indices enter the conv net
            (:data:`rlmem.agents.encoding_names.GRID_ENCODINGS`).
        discrete_encoding: how Discrete/MultiDiscrete fields are encoded
            (:data:`rlmem.agents.encoding_names.DISCRETE_ENCODINGS`).
        shared_memory: the actor and the critic read one memory cell (rl-starter-files);
            False gives the critic a cell of its own (``agent.shared_memory``).
        folded_grid: a MiniGrid grid's encoder computes its embedding, first convolution,
            ReLU and max-pool as one table lookup on the CPU (``agent.folded_grid``,
            :mod:`rlmem.agents.grid_fold`): the same function and weights.
        compiled_lstm: an ``lstm`` memory runs every chunk that a reset cuts in one call of the
            compiled loops on the CPU (``agent.compiled_lstm``,
            :func:`rlmem.cells.compiled_lstm`): the same function and weights. Entered at
            each call of the model, so every thread that runs it takes it.
        blocked_products: the heads' and the folded grid encoder's float32 products take the
            compiled loops' blocked product on a CPU with AVX-512 (``agent.blocked_products``,
            :mod:`rlmem.agents.blocked_linear`): the same function and weights (and state
            dict), rounded otherwise. Entered at each call, as ``compiled_lstm``.
        memory_products: the memory cell's float32 products on the CPU as inside
            :func:`rlmem.cells.onednn_products` (``agent.memory_products``): the same function,
            rounded otherwise. Entered at each call, as ``compiled_lstm``.
    """

    def __init__(self, observation_space: spaces.Space[Any], action_space: spaces.Space[Any] | int,
                 memory: Any, head_size: int = 64, grid_encoding: str = "embedding",
                 discrete_encoding: str = "onehot", shared_memory: bool = True,
                 folded_grid: bool = False, compiled_lstm: bool = False,
                 blocked_products: bool = False, memory_products: bool = False) -> None:
        super().__init__()
        self.compiled_lstm = compiled_lstm
        self.blocked_products = blocked_products
        self.memory_products = memory_products
        if isinstance(action_space, int):
            action_space = spaces.Discrete(action_space)
        # Field -> submodule name; fields that feed the memory, and those that join after it.
        self.field_modules: dict[str, str] = {}
        memory_inputs = 0
        after_memory = 0
        for key, space in observation_fields(observation_space).items():
            encoder = field_encoder(space, grid_encoding, discrete_encoding, folded_grid)
            name = self._module_name(key)
            self.add_module(name, encoder)
            self.field_modules[key] = name
            if encoder.after_memory:
                after_memory += encoder.output_size
            else:
                memory_inputs += encoder.output_size
        self.memory_fields = [key for key, name in self.field_modules.items()
                              if not getattr(self, name).after_memory]
        self.context_fields = [key for key in self.field_modules
                               if key not in self.memory_fields]
        self.memory: Cell = make_cell_from_config(memory, input_size=memory_inputs)
        self.critic_memory: Cell | None = (
            None if shared_memory else make_cell_from_config(memory, input_size=memory_inputs))
        self._state_types: tuple[type[State], type[State]] = (
            (type(self.memory.initial_state(1, device="meta")),
             type(self.critic_memory.initial_state(1, device="meta")))
            if self.critic_memory is not None else (State, State))
        """The actor cell's and the critic cell's state types, to split a paired state."""
        features = self.memory.output_size + after_memory
        head = make_action_head(action_space)
        self.actor = nn.Sequential(Linear(features, head_size), nn.Tanh(),
                                   Linear(head_size, head.num_params))
        self.critic = nn.Sequential(Linear(features, head_size), nn.Tanh(),
                                    Linear(head_size, 1))
        self.actor.apply(_init_linear)
        self.critic.apply(_init_linear)
        # Registered last: parameters (the Gaussian's log-std) after the others, so the
        # optimizer state of a categorical model keeps its order.
        self.action: ActionHead = head

    def _module_name(self, key: str) -> str:
        """The submodule name of observation field ``key``: the key itself where it can be
        one, else ``field_<key>`` with non-identifier characters replaced."""
        if key.isidentifier() and key not in RESERVED_NAMES and not hasattr(self, key):
            return key
        base = "field_" + re.sub(r"\W", "_", key)
        name, suffix = base, 1
        while hasattr(self, name) or name in self.field_modules.values():
            name, suffix = f"{base}_{suffix}", suffix + 1
        return name

    @property
    def shared_memory(self) -> bool:
        """The actor and the critic read one memory cell."""
        return self.critic_memory is None

    def trainable_parameters(self) -> list[nn.Parameter]:
        """The weights the optimiser trains (those that require a gradient), in the order of
        :meth:`parameters`: the order in which a minibatch's gradient is taken in parts
        (:class:`~rlmem.agents.ppo.gradient_parts.GradientInParts`) and in which the replicas of
        a data-parallel run exchange theirs (:mod:`rlmem.agents.ppo.replicas`)."""
        return [parameter for parameter in self.parameters() if parameter.requires_grad]

    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> State:
        """The memory's all-zeros state for ``batch_size`` envs (with a separate critic memory,
        the pair of both cells' states)."""
        state = self.memory.initial_state(batch_size, device=device)
        if self.critic_memory is None:
            return state
        return pair_states(state, self.critic_memory.initial_state(batch_size, device=device))

    def anneal(self, progress: float) -> None:
        """Anneal every memory cell's schedule (:meth:`rlmem.cells.Cell.anneal`)."""
        self.memory.anneal(progress)
        if self.critic_memory is not None:
            self.critic_memory.anneal(progress)

    def _encode(self, keys: list[str], observation: dict[str, Tensor], steps: int,
                batch: int) -> Tensor:
        """The features of fields ``keys``, concatenated. Shapes: ``(T, B, features)``."""
        features = [getattr(self, self.field_modules[key])(observation[key].flatten(0, 1))
                    .view(steps, batch, -1) for key in keys]
        return features[0] if len(features) == 1 else torch.cat(features, dim=-1)

    def forward(self, observation: dict[str, Tensor], state: State,
                resets: Tensor) -> PolicyOutput:
        """Run a time-major batch of observations through the model.

        Args:
            observation: the fields (:func:`rlmem.agents.ppo.observation.observation_fields`).
            state: the memory state before time step 0.
            resets: ``resets[t, b]`` means ``observation[t, b]`` starts an episode: the memory
                of ``b`` is re-initialised before it, and only that of ``b``.

        Shapes:
            - observation[key]: ``(T, B, *field shape)``, e.g. MiniGrid's ``image``
              ``(T, B, H, W, C)`` and ``mission`` ``(T, B, L)``
            - resets: ``(T, B)`` bool
            - returns action_params ``(T, B, head.num_params)``, value ``(T, B)``
        """
        with (compiled_lstm_chunks(self.compiled_lstm), blocked_products(self.blocked_products),
              onednn_products(self.memory_products)):
            steps, batch = resets.shape
            features = self._encode(self.memory_fields, observation, steps, batch)
            if self.critic_memory is None:
                cell_output = self.memory.forward_aux(features, state, resets)
                embedding = cell_output.output
                if self.context_fields:
                    after = self._encode(self.context_fields, observation, steps, batch)
                    embedding = torch.cat([embedding, after], -1)
                return PolicyOutput(self.actor(embedding), self.critic(embedding).squeeze(-1),
                                    cell_output.state, cell_output.aux, self.action)
            actor_state, critic_state = split_state(state, *self._state_types)
            actor_output = self.memory.forward_aux(features, actor_state, resets)
            critic_output = self.critic_memory.forward_aux(features, critic_state, resets)
            context = (self._encode(self.context_fields, observation, steps, batch)
                       if self.context_fields else None)
            return PolicyOutput(
                self.actor(_with_context(actor_output.output, context)),
                self.critic(_with_context(critic_output.output, context)).squeeze(-1),
                pair_states(actor_output.state, critic_output.state),
                _joined_aux(actor_output.aux, critic_output.aux), self.action)


def _with_context(output: Tensor, context: Tensor | None) -> Tensor:
    """A cell's output, with the after-memory fields' features (if any) after it."""
    return output if context is None else torch.cat([output, context], -1)


def _joined_aux(actor: Aux, critic: Aux) -> Aux:
    """The actor cell's :class:`Aux` and the critic cell's, in one: both cells' losses are
    trained (the critic's under ``critic/`` names), and the critic's diagnostics and traces
    are kept under ``critic/`` names beside the actor's."""
    def diagnostics() -> dict[str, Tensor]:
        return {**actor.diagnostics,
                **{f"critic/{key}": value for key, value in critic.diagnostics.items()}}

    return Aux({**actor.losses, **{f"critic/{key}": value for key, value in critic.losses.items()}},
               diagnostics,
               {**actor.traces, **{f"critic/{key}": value for key, value in critic.traces.items()}})

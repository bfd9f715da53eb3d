"""The recurrent actor-critic of our PPO: encoders, any registered memory cell, two heads."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from gymnasium import spaces
from torch import Tensor, nn

from rlmem.agents.encoders import ImageEncoder, MissionEncoder
from rlmem.cells import Aux, Cell, make_cell_from_config


class PolicyOutput(NamedTuple):
    """What :meth:`ActorCritic.forward` returns."""

    logits: Tensor
    """Unnormalised action log-probabilities, ``(T, B, num_actions)``."""
    value: Tensor
    """State values, ``(T, B)``."""
    state: Any
    """The memory state after the last step."""
    aux: Aux
    """The memory cell's auxiliary losses, diagnostics and traces."""


def _init_linear(module: nn.Module) -> None:
    # rl-starter-files: unit-norm rows, zero bias, so initial logits and values are small.
    if isinstance(module, nn.Linear):
        module.weight.data.normal_(0, 1)
        module.weight.data /= module.weight.data.pow(2).sum(1, keepdim=True).sqrt()
        module.bias.data.fill_(0)


class ActorCritic(nn.Module):
    """Image encoder -> memory cell -> [cell output, mission encoding] -> actor and critic.

    As in rl-starter-files, the memory reads the image features and the mission encoding joins
    after it (the mission is visible at every step, so there is nothing to remember about it).

    Args:
        observation_space: a Dict with ``image`` and optionally ``mission``
            (:class:`rlmem.envs.MiniGridObservation`).
        num_actions: size of the discrete action space.
        memory: a memory config (``name``, ``hidden_size``, the cell's hyperparameters).
        head_size: hidden units of the actor and critic MLPs.
        grid_encoding: how the grid's indices enter the conv net
            (:data:`rlmem.agents.encoders.GRID_ENCODINGS`).
    """

    def __init__(self, observation_space: spaces.Dict, num_actions: int, memory: Any,
                 head_size: int = 64, grid_encoding: str = "embedding") -> None:
        super().__init__()
        self.image = ImageEncoder(observation_space["image"].shape, grid_encoding)
        self.mission: MissionEncoder | None = None
        if "mission" in observation_space.spaces:
            self.mission = MissionEncoder(int(observation_space["mission"].high.max()) + 1)
        self.memory: Cell = make_cell_from_config(memory, input_size=self.image.output_size)
        features = self.memory.output_size + (self.mission.output_size if self.mission else 0)
        self.actor = nn.Sequential(nn.Linear(features, head_size), nn.Tanh(),
                                   nn.Linear(head_size, num_actions))
        self.critic = nn.Sequential(nn.Linear(features, head_size), nn.Tanh(),
                                    nn.Linear(head_size, 1))
        self.actor.apply(_init_linear)
        self.critic.apply(_init_linear)

    def initial_state(self, batch_size: int, device: torch.device | str | None = None) -> Any:
        """The memory's all-zeros state for ``batch_size`` envs."""
        return self.memory.initial_state(batch_size, device=device)

    def forward(self, observation: dict[str, Tensor], state: Any, resets: Tensor) -> PolicyOutput:
        """Run a time-major batch of observations through the model.

        Args:
            observation: ``image`` and (if the model has a mission encoder) ``mission``.
            state: the memory state before time step 0.
            resets: ``resets[t, b]`` means ``observation[t, b]`` starts an episode: the memory
                of ``b`` is re-initialised before it, and only that of ``b``.

        Shapes:
            - observation["image"]: ``(T, B, H, W, C)``; observation["mission"]: ``(T, B, L)``
            - resets: ``(T, B)`` bool
            - returns logits ``(T, B, num_actions)``, value ``(T, B)``
        """
        image = observation["image"]
        steps, batch = image.shape[:2]
        features = self.image(image.flatten(0, 1)).view(steps, batch, -1)
        memory = self.memory.forward_aux(features, state, resets)
        embedding = memory.output
        if self.mission is not None:
            mission = self.mission(observation["mission"].flatten(0, 1)).view(steps, batch, -1)
            embedding = torch.cat([embedding, mission], dim=-1)
        return PolicyOutput(self.actor(embedding), self.critic(embedding).squeeze(-1),
                            memory.state, memory.aux)

"""Action heads: the policy's distribution over an action space, chosen by the space's type.

The actor MLP of :class:`~rlmem.agents.ppo.model.ActorCritic` outputs :attr:`ActionHead.num_params`
numbers per step; the head turns them into actions and log-probabilities, in the rollout
(:meth:`ActionHead.sample`), in the PPO loss (:meth:`ActionHead.log_prob_entropy`) and towards
the env (:meth:`ActionHead.env_action`). :func:`make_action_head` is the one place that picks a
head for a space:

- ``Discrete(n)``: a categorical over ``n`` logits;
- ``MultiDiscrete(nvec)``: one categorical per component, log-probabilities summed;
- ``Box``: a diagonal Gaussian with a learned, state-independent log-std (SB3's PPO). The
  rollout stores the *unclipped* sample, and log-probabilities are those of that sample; only
  the action sent to the env is clipped to the bounds (as SB3 does). Squashing with tanh would
  need the log-det correction and makes the bounds unreachable; clipping keeps the Gaussian's
  exact log-probabilities and entropy.

Written out instead of ``torch.distributions``: those classes validate their arguments on every
call, which costs more than the policy itself at batch 16.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import Tensor, nn

from rlmem.runs import NonFiniteLossError

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class UnsupportedActionSpaceError(ValueError):
    """The agent has no head for this action space."""


def sample_actions(logits: Tensor, greedy: bool = False) -> tuple[Tensor, Tensor]:
    """Actions drawn from (or the argmax of) ``softmax(logits)``, and their log-probabilities.

    ``torch.multinomial`` on purpose: it is the cheapest draw at rollout batch sizes.

    Raises:
        NonFiniteLossError: the logits are NaN or infinite (the policy diverged).

    Shapes:
        - logits: ``(B, A)``; returns actions ``(B,)`` long and log-probabilities ``(B,)``
    """
    log_probs = torch.log_softmax(logits, dim=-1)
    if greedy:
        actions = log_probs.argmax(dim=-1)
    else:
        try:
            actions = torch.multinomial(log_probs.exp(), 1).squeeze(-1)
        except RuntimeError as error:  # checked here, not before: no host sync on every step
            if bool(torch.isfinite(logits).all()):
                raise
            raise NonFiniteLossError(
                "the policy diverged: its action logits are NaN or infinite, so no action can "
                "be sampled.") from error
    return actions, log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)


def categorical_log_prob_entropy(logits: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
    """Log-probabilities of ``actions`` under ``softmax(logits)``, and the entropies.

    Shapes:
        - logits: ``(..., A)``; actions: ``(...)`` long; returns two ``(...)`` tensors
    """
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
    return chosen, -(log_probs.exp() * log_probs).sum(-1)


class ActionHead(nn.Module, abc.ABC):
    """A distribution over an action space, parameterised by the actor's output.

    Attributes:
        num_params: numbers the actor outputs per step.
        action_shape: shape of one stored action (without batch dims).
        action_dtype: dtype of the stored actions.
    """

    num_params: int
    action_shape: tuple[int, ...]
    action_dtype: torch.dtype

    @abc.abstractmethod
    def sample(self, params: Tensor, greedy: bool = False) -> tuple[Tensor, Tensor]:
        """Actions drawn from the distribution (or its mode), and their log-probabilities.

        Shapes:
            - params: ``(B, num_params)``; returns actions ``(B, *action_shape)`` and ``(B,)``
        """

    @abc.abstractmethod
    def log_prob_entropy(self, params: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        """Log-probabilities of ``actions`` and the distribution's entropies.

        Shapes:
            - params: ``(..., num_params)``; actions: ``(..., *action_shape)``
            - returns two ``(...)`` tensors
        """

    @abc.abstractmethod
    def env_action(self, actions: Tensor) -> np.ndarray:
        """Stored actions as the batch of actions the (vector) env takes.

        Shapes:
            - actions: ``(B, *action_shape)``; returns ``(B, *space.shape)``
        """


class CategoricalHead(ActionHead):
    """``Discrete(n, start)``: a categorical over ``n`` logits; action ``i`` is ``start + i``.

    Shapes:
        - params: ``(..., n)`` logits; actions: ``(...)`` long
    """

    def __init__(self, space: spaces.Discrete) -> None:
        super().__init__()
        self.num_params = int(space.n)
        self.start = int(space.start)
        self.action_shape = ()
        self.action_dtype = torch.long

    def sample(self, params: Tensor, greedy: bool = False) -> tuple[Tensor, Tensor]:
        return sample_actions(params, greedy)

    def log_prob_entropy(self, params: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        return categorical_log_prob_entropy(params, actions)

    def env_action(self, actions: Tensor) -> np.ndarray:
        array = actions.cpu().numpy()
        return array + self.start if self.start else array

    def extra_repr(self) -> str:
        return f"n={self.num_params}, start={self.start}"


class MultiCategoricalHead(ActionHead):
    """``MultiDiscrete(nvec, start)``: an independent categorical per component (flattened),
    with their logits concatenated; log-probabilities and entropies add up.

    Shapes:
        - params: ``(..., sum(nvec))``; actions: ``(..., len(nvec))`` long
    """

    start: Tensor
    """Each component's first action (the space's ``start``), flattened."""

    def __init__(self, space: spaces.MultiDiscrete) -> None:
        super().__init__()
        self.space_shape = tuple(space.shape)
        self.sizes = [int(n) for n in space.nvec.reshape(-1)]
        self.register_buffer("start", torch.as_tensor(space.start.reshape(-1)),
                             persistent=False)
        self.num_params = sum(self.sizes)
        self.action_shape = (len(self.sizes),)
        self.action_dtype = torch.long

    def sample(self, params: Tensor, greedy: bool = False) -> tuple[Tensor, Tensor]:
        drawn = [sample_actions(logits, greedy) for logits in params.split(self.sizes, dim=-1)]
        actions = torch.stack([action for action, _ in drawn], dim=-1)
        return actions, torch.stack([log_prob for _, log_prob in drawn], dim=-1).sum(-1)

    def log_prob_entropy(self, params: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        parts = [categorical_log_prob_entropy(logits, actions[..., index])
                 for index, logits in enumerate(params.split(self.sizes, dim=-1))]
        return (torch.stack([log_prob for log_prob, _ in parts], -1).sum(-1),
                torch.stack([entropy for _, entropy in parts], -1).sum(-1))

    def env_action(self, actions: Tensor) -> np.ndarray:
        array = (actions + self.start).cpu().numpy()
        return array.reshape(array.shape[0], *self.space_shape)

    def extra_repr(self) -> str:
        return f"nvec={self.sizes}"


class GaussianHead(ActionHead):
    """``Box``: a diagonal Gaussian; the actor outputs the mean, the log-std is a learned
    parameter of its own (state-independent, initialised at ``log_std_init``).

    The rollout stores the unclipped sample; :meth:`env_action` clips it to the space's bounds
    (the env's, so evaluating on another env uses that env's bounds). The mode is the mean.

    .. math::
        a \\sim \\mathcal N(\\mu, \\mathrm{diag}(\\sigma^2)), \\qquad
        \\log \\pi(a) = -\\sum_i \\Big(\\frac{(a_i - \\mu_i)^2}{2 \\sigma_i^2} + \\log \\sigma_i
        + \\tfrac12 \\log 2\\pi\\Big)

    Shapes:
        - params: ``(..., dim)`` means, ``dim = prod(space.shape)``; actions: ``(..., dim)``
    """

    def __init__(self, space: spaces.Box, log_std_init: float = 0.0) -> None:
        super().__init__()
        self.space_shape = tuple(space.shape)
        dim = int(np.prod(space.shape))
        self.num_params = dim
        self.action_shape = (dim,)
        self.action_dtype = torch.float32
        self.log_std = nn.Parameter(torch.full((dim,), float(log_std_init)))
        self.low = space.low.reshape(-1).astype(np.float32)
        self.high = space.high.reshape(-1).astype(np.float32)
        self.space_dtype = space.dtype

    def sample(self, params: Tensor, greedy: bool = False) -> tuple[Tensor, Tensor]:
        noise = 0.0 if greedy else self.log_std.exp() * torch.randn_like(params)
        actions = params + noise
        log_prob, _ = self.log_prob_entropy(params, actions)
        return actions, log_prob

    def log_prob_entropy(self, params: Tensor, actions: Tensor) -> tuple[Tensor, Tensor]:
        log_std = self.log_std.expand_as(params)
        log_prob = -((actions - params) ** 2 / (2 * torch.exp(2 * log_std)) + log_std
                     + _LOG_SQRT_2PI).sum(-1)
        entropy = (0.5 + _LOG_SQRT_2PI + log_std).sum(-1)
        return log_prob, entropy

    def env_action(self, actions: Tensor) -> np.ndarray:
        array = actions.detach().cpu().numpy()
        if not np.isfinite(array).all():  # on the host already: no extra sync
            raise NonFiniteLossError("the policy diverged: its actions are NaN or infinite.")
        clipped = np.clip(array, self.low, self.high).astype(self.space_dtype)
        return clipped.reshape(array.shape[0], *self.space_shape)

    def extra_repr(self) -> str:
        return f"shape={self.space_shape}"


def make_action_head(space: spaces.Space[Any]) -> ActionHead:
    """The head of ``space``, chosen by its type (see the module docstring).

    Raises:
        UnsupportedActionSpaceError: not a Discrete, MultiDiscrete or Box space.
    """
    if isinstance(space, spaces.Discrete):
        return CategoricalHead(space)
    if isinstance(space, spaces.MultiDiscrete):
        return MultiCategoricalHead(space)
    if isinstance(space, spaces.Box):
        return GaussianHead(space)
    raise UnsupportedActionSpaceError(
        f"the action space {space} has no action head; supported: Discrete, MultiDiscrete and "
        "Box actions (wrap the env to map other actions onto one of these)")

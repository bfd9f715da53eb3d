"""What the tensor versions of POPGym's envs share: copying the state of POPGym's own envs
(``from_reference``), and reading the observation of every env (``observe``)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import gymnasium as gym
import torch
from torch import Tensor

from rlmem.envs.tensor.base import TensorObservation, TensorVectorEnv
from rlmem.envs.tensor.random import fold_seed

Env = TypeVar("Env", bound="PopgymTensorEnv")

LEVEL_SUFFIXES = ("", "Easy", "Medium", "Hard")
"""How the names of POPGym's classes of one env end: the env, and its levels."""


class PopgymTensorEnv(TensorVectorEnv):
    """A tensor version of one of POPGym's envs (Morad et al., 2023), at one difficulty.

    Subclasses implement :class:`~rlmem.envs.tensor.base.TensorVectorEnv`'s three methods, and
    :meth:`parameters_of` and :meth:`_load` to copy POPGym's own envs.
    """

    @classmethod
    def from_reference(cls: type[Env], envs: Sequence[gym.Env[Any, Any]],
                       device: torch.device | str = "cpu") -> Env:
        """A tensor env whose copy ``i`` is in the state of ``envs[i]`` (POPGym envs, already
        reset, possibly wrapped), with the difficulty they have. The copies' seeds for their
        later episodes are ``0 .. len(envs)-1``.

        Raises:
            ValueError: the envs differ in difficulty, or are not this env's.
        """
        originals = [env.unwrapped for env in envs]
        parameters = [cls.parameters_of(env) for env in originals]
        if any(other != parameters[0] for other in parameters):
            raise ValueError(f"{cls.__name__}.from_reference: the envs differ in difficulty "
                             f"({parameters}); give copies of one env")
        tensor_env = cls(len(originals), device=device, **parameters[0])
        tensor_env.seeds = fold_seed(torch.arange(len(originals), device=tensor_env.device))
        tensor_env.load_reference(originals, range(len(originals)))
        return tensor_env

    def load_reference(self, envs: Sequence[gym.Env[Any, Any]], rows: Iterable[int]) -> None:
        """Copy the state of ``envs`` (POPGym envs) into the copies ``rows``, one each."""
        for row, env in zip(rows, envs, strict=True):
            self._load(row, env.unwrapped)

    def observe(self) -> TensorObservation:
        """Every copy's current observation (the last one :meth:`step` or :meth:`reset`
        returned, unless :meth:`load_reference` replaced a copy's state since)."""
        return self._observe()

    @classmethod
    @abstractmethod
    def parameters_of(cls, env: Any) -> dict[str, Any]:
        """The constructor's keyword arguments (the difficulty) of POPGym's env ``env``.

        Raises:
            ValueError: ``env`` is not this env's POPGym original.
        """

    @abstractmethod
    def _load(self, row: int, env: Any) -> None:
        """Copy the state of POPGym's env ``env`` (unwrapped) into copy ``row``."""

    @classmethod
    def _check_original(cls, env: Any) -> None:
        """Raise ValueError unless ``env`` is POPGym's env of this class's name (each tensor
        env is named as its original), or one of its levels (``RepeatPreviousEasy``), but not
        a variant that derives from it (``NoisyPositionOnlyCartPole``)."""
        if type(env).__name__.removeprefix(cls.__name__) not in LEVEL_SUFFIXES:
            raise ValueError(f"{cls.__name__} copies POPGym's {cls.__name__}, not "
                             f"{type(env).__name__}")


def scored(right: Tensor, scale: float) -> Tensor:
    """``+scale`` where ``right``, else ``-scale``, in float64 (POPGym's rewards are Python
    floats).

    Shapes: ``(N,)`` bool -> ``(N,)`` float64.
    """
    plus = torch.full(right.shape, scale, dtype=torch.float64, device=right.device)
    return torch.where(right, plus, -plus)

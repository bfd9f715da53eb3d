"""A tensor env as Stable-Baselines3's :class:`~stable_baselines3.common.vec_env.VecEnv`, for
sb3 and sb3-contrib (RecurrentPPO) users: :class:`TensorSB3VecEnv`.

SB3 takes NumPy arrays, so each step's tensors are copied to the CPU; an env on a GPU still
steps there. Episode statistics come from SB3's own
:class:`~stable_baselines3.common.vec_env.VecMonitor` wrapped around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvObs, VecEnvStepReturn
from torch import Tensor

from rlmem.envs.tensor.base import TensorObservation, TensorVectorEnv


def to_numpy(observation: TensorObservation) -> np.ndarray | dict[str, np.ndarray]:
    """A batch of tensor observations as SB3's arrays (field by field for a Dict)."""
    if isinstance(observation, Tensor):
        return observation.cpu().numpy()
    if isinstance(observation, tuple):
        raise ValueError("SB3 takes no Tuple observation: flatten it first "
                         "(wrappers=[gymnasium.wrappers:FlattenObservation])")
    return {key: value.cpu().numpy() for key, value in observation.items()}


class TensorSB3VecEnv(VecEnv):
    """SB3's vector-env interface over a :class:`~rlmem.envs.tensor.TensorVectorEnv`.

    As SB3's ``DummyVecEnv``: a step that ends an episode returns the next episode's first
    observation, with the last one in ``infos[i]["terminal_observation"]`` and
    ``infos[i]["TimeLimit.truncated"]`` set when the episode was cut by its time limit, not
    ended. Seeds set by :meth:`seed` take effect at the next :meth:`reset` (env ``i`` gets
    ``seed + i``); a reset without them draws fresh seeds.

    The copies are one object, so :meth:`get_attr` gives the tensor env's attribute for each,
    :meth:`set_attr` and :meth:`env_method` act on all copies at once, and no copy is wrapped.
    """

    def __init__(self, env: TensorVectorEnv) -> None:
        self.env = env  # first: SB3's constructor asks it for its render_mode
        super().__init__(env.num_envs, env.single_observation_space, env.single_action_space)
        self._actions: Any = None

    def reset(self) -> VecEnvObs:
        seeds = [seed for seed in self._seeds if seed is not None]
        observation, _ = self.env.reset(seed=seeds if len(seeds) == self.num_envs else None)
        self._reset_seeds()
        return to_numpy(observation)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        observation, reward, terminated, truncated, info = self.env.step(self._actions)
        ended = (terminated | truncated).cpu().numpy()
        cut = (truncated & ~terminated).cpu().numpy()
        infos: list[dict[str, Any]] = [{"TimeLimit.truncated": bool(cut[i])}
                                       for i in range(self.num_envs)]
        if ended.any():
            final = to_numpy(info["final_obs"])
            for i in np.flatnonzero(ended):
                infos[i]["terminal_observation"] = (
                    final[i] if isinstance(final, np.ndarray)
                    else {key: value[i] for key, value in final.items()})
        return (to_numpy(observation), reward.cpu().numpy().astype(np.float32), ended, infos)

    def close(self) -> None:
        self.env.close()

    def _all(self, indices: int | Iterable[int] | None) -> list[int]:
        return list(self._get_indices(indices))

    def get_attr(self, attr_name: str, indices: int | Iterable[int] | None = None) -> list[Any]:
        return [getattr(self.env, attr_name) for _ in self._all(indices)]

    def set_attr(self, attr_name: str, value: Any,
                 indices: int | Iterable[int] | None = None) -> None:
        if len(self._all(indices)) != self.num_envs:
            raise ValueError(f"set_attr({attr_name!r}) on some copies of a tensor env: its "
                             "copies are one object, set the attribute for all of them")
        setattr(self.env, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any,
                   indices: int | Iterable[int] | None = None, **method_kwargs: Any) -> list[Any]:
        if len(self._all(indices)) != self.num_envs:
            raise ValueError(f"env_method({method_name!r}) on some copies of a tensor env: its "
                             "copies are one object, call the method for all of them")
        result = getattr(self.env, method_name)(*method_args, **method_kwargs)
        return [result] * self.num_envs

    def env_is_wrapped(self, wrapper_class: type[Any],
                       indices: int | Iterable[int] | None = None) -> list[bool]:
        return [False for _ in self._all(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None] * self.num_envs

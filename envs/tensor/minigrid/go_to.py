"""What GoToObject and GoToDoor share: :class:`GoTo`, a family whose episode ends with ``done``
next to a target cell (rewarded) or with ``toggle`` (not), as ``GoToObjectEnv.step`` and
``GoToDoorEnv.step`` end theirs::

    if action == toggle: terminated = True
    if action == done:
        if agent is next to target_pos (one cell along x or y): reward = _reward()
        terminated = True

Both see through walls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from minigrid.core.actions import Actions
from minigrid.envs import GoToDoorEnv, GoToObjectEnv
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.envs.tensor.minigrid.env import MiniGridTensorEnv


class GoTo(MiniGridTensorEnv):
    """A MiniGrid family whose mission names a cell to stand next to (the module's docstring).

    Each env keeps, besides MiniGrid's world, ``target_pos``, ``(N, 2)`` int64: the cell to go
    to (where the target was laid out, even once it is picked up or opened).
    """

    see_through_walls = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """:class:`MiniGridTensorEnv`'s arguments."""
        super().__init__(*args, **kwargs)
        self.target_pos = torch.zeros(self.num_envs, 2, dtype=torch.int64, device=self.device)

    def _outcome(self, action: Tensor, reward: Tensor, terminated: Tensor
                 ) -> tuple[Tensor, Tensor]:
        done = action == Actions.done
        next_to = (self.agent_pos - self.target_pos).abs().sum(dim=1) == 1
        reward = torch.where(done & next_to, self._success_reward(), reward)
        return reward, terminated | done | (action == Actions.toggle)

    def _copy_family_state(self, envs: Sequence[MiniGridEnv]) -> None:
        positions = []
        for env in envs:
            assert isinstance(env, GoToObjectEnv | GoToDoorEnv)  # from_reference checked it
            positions.append(env.target_pos)
        self.target_pos = torch.as_tensor(np.array(positions, dtype=np.int64),
                                          device=self.device)

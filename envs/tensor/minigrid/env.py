"""The MiniGrid world as tensors: :class:`MiniGridTensorEnv`, ``MiniGridEnv.step`` and
``gen_obs`` for a batch of envs, from which each MiniGrid family derives its layout
(:mod:`~rlmem.envs.tensor.minigrid.doorkey`, :mod:`~rlmem.envs.tensor.minigrid.memory`).

State (``N`` envs, a ``W x H`` world):

- ``grid``: ``(N, W, H, 4)`` uint8, each cell's ``(object, colour, state)`` encoding
  (MiniGrid's ``Grid.encode()`` of the world), empty cells ``(1, 0, 0)``, and a zero byte
  (:data:`~rlmem.envs.tensor.minigrid.objects.CELL_BYTES`);
- ``agent_pos``: ``(N, 2)`` int64 ``(x, y)``; ``agent_dir``: ``(N,)`` int64, 0 east .. 3 north;
- ``carrying``: ``(N, 4)`` uint8, the carried object's cell, ``(1, 0, 0, 0)`` for nothing;
- ``step_count``: ``(N,)`` int64;
- ``mission_index``: ``(N,)`` int64, which of the family's missions (``missions``) each env's
  episode has.

One step is MiniGrid's, every branch computed for every env and the taken one selected
(reference: ``MiniGridEnv.step``): left and right turn; forward moves onto a cell the agent can
overlap and ends the episode on a goal (reward ``1 - 0.9 * step_count / max_steps``) or lava
(reward 0); pickup takes a pickable object when the hands are empty; drop puts the carried
object on an empty cell; toggle opens and closes a door, unlocks a locked one with a key of its
colour, and opens a box (a box holds nothing here: no family of ours fills one); done does
nothing. ``truncated`` is ``step_count >= max_steps``.

The observation is :class:`rlmem.envs.MiniGridObservation`'s: ``image`` (the egocentric view,
:mod:`~rlmem.envs.tensor.minigrid.view`, every cell seen in a family whose
:attr:`~MiniGridTensorEnv.see_through_walls` is True), and, when asked, ``direction`` and the
tokenised ``mission`` (a row of the family's missions' tokens, looked up by ``mission_index``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from minigrid.core.actions import Actions
from minigrid.core.constants import DIR_TO_VEC
from minigrid.minigrid_env import MiniGridEnv
from torch import Tensor

from rlmem.cells._engines import compiled
from rlmem.envs.minigrid_observation import encoded_space, tokenize
from rlmem.envs.tensor.base import TensorVectorEnv
from rlmem.envs.tensor.minigrid.objects import (
    BOX,
    CELL_BYTES,
    CLOSED,
    DOOR,
    GOAL,
    KERNEL_CODES,
    KEY,
    LAVA,
    LOCKED,
    NOTHING,
    NOTHING_CODE,
    OPEN,
    WALL_CELL,
    can_overlap,
    can_pickup,
    encoding,
    packed,
)
from rlmem.envs.tensor.minigrid.view import egocentric_image

E = TypeVar("E", bound="MiniGridTensorEnv")


@dataclass
class Layout:
    """New episodes of a family, ``k`` of them: what :meth:`MiniGridTensorEnv._layout` draws.

    Shapes: ``grid`` ``(k, W, H, 4)`` uint8; ``agent_pos`` ``(k, 2)``; ``agent_dir`` ``(k,)``;
    ``mission_index`` ``(k,)`` int64 (None: the family's first mission, for a family with one);
    each of ``extra`` (a family's own state, by attribute name) ``(k, ...)``.
    """

    grid: Tensor
    agent_pos: Tensor
    agent_dir: Tensor
    extra: dict[str, Tensor] = field(default_factory=dict)
    mission_index: Tensor | None = None


VIEW_SIZE = 7
"""MiniGrid's default ``agent_view_size``."""


def check_objects(family: str, size: int, num_objs: int, most: int) -> None:
    """Refuse a room walled round, ``size`` cells across, that cannot hold ``num_objs`` objects
    (at least 1, at most ``most``) and the agent on its ``(size - 2) ** 2`` free cells.

    Raises:
        ValueError: it cannot, naming ``family`` and the bounds.
    """
    if not 1 <= num_objs <= min(most, (size - 2) ** 2 - 1):
        raise ValueError(f"{family} needs 1 <= num_objs <= {most} and num_objs <= (size - 2) ** 2 "
                         f"- 1 (the free cells but one, for the agent), got size={size}, "
                         f"num_objs={num_objs}")


class MiniGridTensorEnv(TensorVectorEnv):
    """``num_envs`` MiniGrid worlds of ``width x height`` cells (the module's docstring).

    Args:
        num_envs: envs.
        width, height: the world's size.
        max_steps: MiniGrid's ``max_steps``.
        missions: the family's missions, every text an episode can have (what ``mission=True``
            tokenises; an episode's is ``missions[mission_index]``).
        draws_per_episode: the uniform draws the family's layout takes.
        device: where the state lives.
        mission: add the tokenised mission to the observation (as
            :class:`rlmem.envs.MiniGridObservation`).
        direction: add the agent's direction to the observation.
        agent_view_size: cells the agent sees across (odd, at least 3).
    """

    see_through_walls: ClassVar[bool] = False
    """MiniGrid's ``see_through_walls`` of the family: True shows every cell of the view (no
    visibility mask), as Fetch, GoToObject and GoToDoor do."""

    def __init__(self, num_envs: int, width: int, height: int, max_steps: int,
                 missions: Sequence[str], draws_per_episode: int,
                 device: torch.device | str = "cpu", *, mission: bool = False,
                 direction: bool = False, agent_view_size: int = VIEW_SIZE) -> None:
        if agent_view_size < 3 or agent_view_size % 2 == 0:
            raise ValueError(f"agent_view_size must be odd and at least 3 (MiniGrid's rule), "
                             f"got {agent_view_size}")
        if max_steps <= 0:
            raise ValueError(f"max_steps must be positive, got {max_steps}")
        image = spaces.Box(low=0, high=255, shape=(agent_view_size, agent_view_size, 3),
                           dtype=np.uint8)
        super().__init__(num_envs, encoded_space(image, agent_view_size, mission, direction),
                         spaces.Discrete(len(Actions)), draws_per_episode, device)
        self.width, self.height, self.max_steps = width, height, max_steps
        self.view_size = agent_view_size
        self.mission, self.direction = mission, direction
        self.missions = tuple(missions)
        self._mission_tokens = torch.as_tensor(np.stack([tokenize(text) for text in missions]),
                                               device=self.device)
        device = self.device
        self.grid = torch.zeros(num_envs, width, height, CELL_BYTES, dtype=torch.uint8,
                                device=device)
        self.agent_pos = torch.zeros(num_envs, 2, dtype=torch.int64, device=device)
        self.agent_dir = torch.zeros(num_envs, dtype=torch.int64, device=device)
        # Constants made once: a tensor made from Python values on a GPU waits for the device.
        self._nothing = encoding(NOTHING, device)
        self.carrying = self._nothing.expand(num_envs, CELL_BYTES).clone()
        self.step_count = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.mission_index = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self._dir_to_vec = torch.as_tensor(np.stack(DIR_TO_VEC), dtype=torch.int64,
                                           device=device)
        self._action_ids = torch.arange(len(Actions), device=device)
        turns = {Actions.left: 3, Actions.right: 1}  # a quarter turn back or on, mod 4
        self._turns = torch.tensor([turns.get(action, 0) for action in Actions], device=device)

    # --- a family's layout --------------------------------------------------------------------

    @abstractmethod
    def _layout(self, draws: Tensor) -> Layout:
        """New episodes' layouts, one per row of ``draws`` (``(k, draws_per_episode)``)."""

    def _generate(self, envs: Tensor, draws: Tensor) -> None:
        # Only the envs that reset are laid out, or all and selected (``masked_resets``).
        rows = None if self.masked_resets else envs.nonzero().squeeze(1)
        layout = self._layout(draws if rows is None else draws[rows])
        nothing = self._nothing.expand(len(layout.agent_dir), CELL_BYTES)
        state = {"grid": layout.grid, "agent_pos": layout.agent_pos,
                 "agent_dir": layout.agent_dir, "carrying": nothing,
                 "step_count": torch.zeros_like(layout.agent_dir),
                 "mission_index": (torch.zeros_like(layout.agent_dir)
                                   if layout.mission_index is None else layout.mission_index),
                 **layout.extra}
        for name, value in state.items():
            current: Tensor = getattr(self, name)
            if rows is None:
                selected = envs.view(-1, *[1] * (current.dim() - 1))
                setattr(self, name, torch.where(selected, value, current))
            else:
                current[rows] = value

    def coordinates(self) -> tuple[Tensor, Tensor]:
        """Every cell's ``x`` and ``y``, to build layouts by comparison.

        Shapes: returns two ``(1, W, H)`` int64.
        """
        x = torch.arange(self.width, device=self.device).view(1, -1, 1)
        y = torch.arange(self.height, device=self.device).view(1, 1, -1)
        return x.expand(1, self.width, self.height), y.expand(1, self.width, self.height)

    def walls(self, walls: Tensor) -> Tensor:
        """Worlds of grey walls where ``walls`` holds, empty cells elsewhere.

        Shapes: ``(k, W, H)`` bool -> ``(k, W, H, 4)`` uint8.
        """
        return torch.where(walls.unsqueeze(-1), encoding(WALL_CELL, self.device),
                           encoding(NOTHING, self.device))

    def border(self) -> Tensor:
        """The world's outer wall (MiniGrid's ``wall_rect(0, 0, width, height)``).

        Shapes: returns ``(1, W, H)`` bool.
        """
        x, y = self.coordinates()
        return (x == 0) | (x == self.width - 1) | (y == 0) | (y == self.height - 1)

    def position(self, cell: Tensor) -> Tensor:
        """The ``(x, y)`` of flat cell indices ``x * height + y``.

        Shapes: ``(...)`` int64 -> ``(..., 2)`` int64.
        """
        return torch.stack((cell // self.height, cell % self.height), dim=-1)

    # --- the step -----------------------------------------------------------------------------

    def _actions(self, actions: Tensor) -> Tensor:
        """The actions MiniGrid's step applies (a family that remaps some overrides this)."""
        return actions.to(torch.int64)

    def _outcome(self, action: Tensor, reward: Tensor, terminated: Tensor
                 ) -> tuple[Tensor, Tensor]:
        """A family's own rewards and ends after MiniGrid's step of ``action`` (as
        :meth:`_actions` gives it); none by default."""
        return reward, terminated

    def _success_reward(self) -> Tensor:
        """MiniGrid's ``_reward()``: ``1 - 0.9 * (step_count / max_steps)``, float64."""
        return 1 - 0.9 * (self.step_count.to(torch.float64) / self.max_steps)

    def _transition(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        action = self._actions(actions.reshape(self.num_envs))
        goal, lava = self._move(action)
        reward = torch.where(goal, self._success_reward(), 0.0)
        reward, terminated = self._outcome(action, reward, goal | lava)
        return reward, terminated, self.step_count >= self.max_steps

    def _move(self, action: Tensor) -> tuple[Tensor, Tensor]:
        """MiniGrid's step of ``action`` in every world (the module's docstring), but for its
        reward: the state moves on; returns whether each env stepped onto a goal, and onto lava.

        On the CPU the compiled loops take the step in one pass over the envs
        (``minigrid_transition`` in ``rlmem/cells/_engines/csrc/minigrid.h``, the same rules
        as below; :mod:`rlmem.cells._engines.compiled` says when they do not run).

        Shapes: ``action`` ``(N,)`` int64; returns two ``(N,)`` bool.
        """
        native = compiled.ops(self.grid)
        if native is not None:
            self.step_count, self.agent_dir, self.agent_pos, goal, lava = \
                native.minigrid_transition(action, self.grid, self.agent_pos, self.agent_dir,
                                           self.carrying, self.step_count, self._dir_to_vec,
                                           self._turns, KERNEL_CODES)
            return goal, lava
        self.step_count = self.step_count + 1
        taken = action[:, None] == self._action_ids  # (N, 7), one column per action
        front = self.agent_pos + self._dir_to_vec[self.agent_dir]
        # The worlds are walled round, so the cell in front is always inside.
        at = (front[:, 0] * self.height + front[:, 1])[:, None]
        cells = packed(self.grid).flatten(1)
        cell = cells.gather(1, at).squeeze(1)  # packed: object | colour << 8 | state << 16
        kind, state = cell & 0xFF, cell >> 16
        self.agent_dir = (self.agent_dir + self._turns[action]) % 4
        forward = taken[:, Actions.forward]
        moves = forward & can_overlap(cell)
        self.agent_pos = torch.where(moves[:, None], front, self.agent_pos)
        carried = packed(self.carrying)
        holding = carried != NOTHING_CODE
        picks = taken[:, Actions.pickup] & can_pickup(cell) & ~holding
        drops = taken[:, Actions.drop] & (cell == NOTHING_CODE) & holding
        toggle = taken[:, Actions.toggle]
        # a locked door opens with a key of its colour (object and colour bytes of the key's
        # code match the door's once the door's object byte is replaced by KEY's)
        unlocks = (toggle & (kind == DOOR) & (state == LOCKED)
                   & (carried == ((cell & 0xFF00) | KEY)))
        swings = toggle & (kind == DOOR) & (state != LOCKED)
        new_state = torch.where(unlocks | (swings & (state == CLOSED)), OPEN,
                                torch.where(swings, CLOSED, state))
        new_cell = torch.where(picks | (toggle & (kind == BOX)), NOTHING_CODE,
                               torch.where(drops, carried, (cell & 0xFFFF) | (new_state << 16)))
        cells.scatter_(1, at, new_cell.unsqueeze(1).to(torch.int32))
        carried.copy_(torch.where(picks, cell, torch.where(drops, NOTHING_CODE, carried)))
        return forward & (kind == GOAL), forward & (kind == LAVA)

    def _observed_state(self) -> tuple[Tensor, ...]:
        """What an observation is made of: :meth:`_observation`'s arguments."""
        return self.grid, self.agent_pos, self.agent_dir, self.carrying, self.mission_index

    def _observe(self) -> dict[str, Tensor]:
        return self._observation(*self._observed_state())

    def _reset_rows(self, done: Tensor, rows: Tensor
                    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        # The ended envs' old state is kept and observed with the new batch, in one go.
        old = [value[rows] for value in self._observed_state()]
        self._generate(done, self._draws())
        both = self._observation(*(torch.cat((now, then)) for now, then in zip(
            self._observed_state(), old, strict=True)))
        return ({key: value[self.num_envs:] for key, value in both.items()},
                {key: value[:self.num_envs] for key, value in both.items()})

    def _observation(self, grid: Tensor, agent_pos: Tensor, agent_dir: Tensor,
                     carrying: Tensor, mission_index: Tensor) -> dict[str, Tensor]:
        """:class:`rlmem.envs.MiniGridObservation`'s fields for the given envs' state."""
        observation = {"image": egocentric_image(grid, agent_pos, agent_dir, carrying,
                                                 self.view_size,
                                                 see_through_walls=self.see_through_walls)}
        if self.direction:
            observation["direction"] = agent_dir.clone()
        if self.mission:
            observation["mission"] = self._mission_tokens[mission_index]
        return observation

    # --- copying MiniGrid's own envs ------------------------------------------------------------

    @classmethod
    @abstractmethod
    def _reference_arguments(cls, env: MiniGridEnv) -> dict[str, Any]:
        """The constructor's arguments (besides ``num_envs``, ``device`` and the observation's
        options) that make envs like ``env``.

        Raises:
            ValueError: ``env`` is not of this family.
        """

    def _copy_family_state(self, envs: Sequence[MiniGridEnv]) -> None:
        """Copy what a family keeps besides MiniGrid's world (nothing by default)."""

    @classmethod
    def from_reference(cls: type[E], envs: Sequence[gym.Env],
                       device: torch.device | str = "cpu", *, mission: bool = False,
                       direction: bool = False) -> E:
        """Envs in the current state of MiniGrid's own ``envs`` (reset already, wrapped or
        not), one copy each: the same world, agent, carried object and step count.

        Raises:
            ValueError: the envs differ in their family's arguments, or one is not of the
                family, or sees through walls where the family does not (or the reverse), or
                has a mission the family does not know, or a box holds something (a box's
                content is not modelled).
        """
        worlds = [env.unwrapped for env in envs]
        if not all(isinstance(world, MiniGridEnv) for world in worlds):
            raise ValueError(f"{cls.__name__}.from_reference takes MiniGrid envs, got {envs}")
        minigrids: list[MiniGridEnv] = worlds  # type: ignore[assignment]
        arguments = [cls._reference_arguments(world) for world in minigrids]
        if any(argument != arguments[0] for argument in arguments):
            raise ValueError(f"{cls.__name__}.from_reference: the envs differ ({arguments})")
        copy = cls(len(minigrids), device=device, mission=mission, direction=direction,
                   agent_view_size=minigrids[0].agent_view_size, **arguments[0])
        unknown = {world.mission for world in minigrids} - set(copy.missions)
        if unknown or any(world.see_through_walls != cls.see_through_walls
                          for world in minigrids):
            raise ValueError(f"{cls.__name__}.from_reference: missions {sorted(unknown)} are "
                             f"none of the family's, or see_through_walls is not "
                             f"{cls.see_through_walls} in every env")
        if any(getattr(cell, "contains", None) is not None
               for world in minigrids for cell in world.grid.grid):
            raise ValueError(f"{cls.__name__}.from_reference: a box holds an object, which the "
                             "tensor envs do not model")

        def stacked(values: list[Any], dtype: torch.dtype) -> Tensor:
            return torch.as_tensor(np.stack(values), dtype=dtype, device=copy.device)

        copy.grid = stacked([np.pad(world.grid.encode(), ((0, 0), (0, 0), (0, 1)))
                             for world in minigrids], torch.uint8)
        copy.agent_pos = stacked([np.asarray(world.agent_pos) for world in minigrids],
                                 torch.int64)
        copy.agent_dir = stacked([world.agent_dir for world in minigrids], torch.int64)
        copy.carrying = stacked([(*world.carrying.encode(), 0) if world.carrying
                                 else (*NOTHING, 0) for world in minigrids], torch.uint8)
        copy.step_count = stacked([world.step_count for world in minigrids], torch.int64)
        copy.mission_index = stacked([copy.missions.index(world.mission) for world in minigrids],
                                     torch.int64)
        copy._copy_family_state(minigrids)
        return copy

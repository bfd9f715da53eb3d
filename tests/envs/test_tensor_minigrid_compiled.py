"""MiniGrid's step and view through the compiled loops (``csrc/minigrid.h``) equal the tensor
ops they replace on the CPU, bit for bit, and both equal MiniGrid's own.

The other tensor-MiniGrid tests run on the CPU, so they check the compiled path against
MiniGrid; ``test_tensor_minigrid_steps.py`` and ``test_tensor_minigrid_view.py`` check the tensor
ops (the path off the CPU, and with ``RLMEM_NO_EXTENSION=1``) against MiniGrid too. Here the two
paths are compared with each other: in lockstep over every family, the envs' whole state
compared at every step; on random worlds, every view size, with and without seeing through
walls; and every action from random worlds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
import torch
from tensor_minigrid_check import ACTION_WEIGHTS

from rlmem.cells._engines import compiled
from rlmem.envs import EnvOptions
from rlmem.envs.tensor.minigrid import DoorKey
from rlmem.envs.tensor.minigrid.objects import (
    BALL,
    BOX,
    CLOSED,
    DOOR,
    EMPTY,
    GOAL,
    KEY,
    LAVA,
    LOCKED,
    OPEN,
    WALL,
)
from rlmem.envs.tensor.minigrid.view import TABLE_VIEW, egocentric_image

pytestmark = pytest.mark.skipif(compiled.ops(torch.zeros(1)) is None,
                                reason="the compiled loops are not built here")

STATE = ("grid", "agent_pos", "agent_dir", "carrying", "step_count")
"""What every MiniGrid tensor env keeps of its worlds (a family may keep more)."""


@contextmanager
def tensor_ops() -> Iterator[None]:
    """The tensor ops in place of the compiled loops while inside."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(compiled.DISABLE_VARIABLE, "1")
        yield


def flat(value: object) -> list[torch.Tensor]:
    """Every tensor in a step's result (observations by field, infos), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [tensor for key in sorted(value) for tensor in flat(value[key])]
    if isinstance(value, tuple | list):
        return [tensor for item in value for tensor in flat(item)]
    return []


@pytest.mark.parametrize("env", ["DoorKey-5x5", "MemoryS7", "MemoryS13Random",
                                 "RedBlueDoors-6x6", "Fetch-5x5-N2", "GoToDoor-5x5",
                                 "GoToObject-6x6-N2"])
def test_compiled_steps_equal_the_tensor_ops(env: str) -> None:
    """Both paths from the same seed with the same actions (pickups, drops and toggles made
    common): every output, and the worlds, agents and carried objects, equal at every step."""
    compiled_envs = EnvOptions().make_vector(env, 16, backend="tensor", device="cpu")
    with tensor_ops():
        reference = EnvOptions().make_vector(env, 16, backend="tensor", device="cpu")
        first = reference.reset(seed=3)
    assert all(torch.equal(a, b) for a, b in zip(flat(compiled_envs.reset(seed=3)),
                                                 flat(first), strict=True))
    rng = np.random.default_rng(3)
    ended = 0
    for step in range(400):
        actions = torch.as_tensor(rng.choice(len(ACTION_WEIGHTS), size=16, p=ACTION_WEIGHTS))
        got = compiled_envs.step(actions)
        with tensor_ops():
            expected = reference.step(actions)
        assert all(torch.equal(a, b) for a, b in zip(flat(got), flat(expected), strict=True)), \
            f"{env}, step {step}"
        for name in STATE:
            assert torch.equal(getattr(compiled_envs, name), getattr(reference, name)), \
                f"{env}, step {step}: {name}"
        ended += int((got[2] | got[3]).sum())
    assert ended > 0


def random_worlds(envs: int, width: int, height: int, generator: torch.Generator
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Worlds of random cells (every object, doors open, shut and locked, in any colour),
    walled round, with agents anywhere inside, facing anywhere, carrying anything or nothing.

    Shapes: ``(N, W, H, 4)`` uint8, ``(N, 2)``, ``(N,)``, ``(N, 4)`` uint8.
    """
    kinds = torch.tensor([EMPTY, EMPTY, EMPTY, WALL, DOOR, KEY, BALL, BOX, GOAL, LAVA])
    kind = kinds[torch.randint(len(kinds), (envs, width, height), generator=generator)]
    state = torch.where(kind == DOOR, torch.tensor([OPEN, CLOSED, LOCKED])[
        torch.randint(3, (envs, width, height), generator=generator)], 0)
    colour = torch.where(kind == EMPTY, 0, torch.randint(6, (envs, width, height),
                                                         generator=generator))
    border = torch.zeros(width, height, dtype=torch.bool)
    border[[0, -1], :] = border[:, [0, -1]] = True
    kind = torch.where(border, WALL, kind)
    colour = torch.where(border, 5, colour)  # grey
    grid = torch.stack((kind, colour, torch.where(border, 0, state), torch.zeros_like(kind)),
                       dim=-1).to(torch.uint8)
    position = torch.stack((torch.randint(1, width - 1, (envs,), generator=generator),
                            torch.randint(1, height - 1, (envs,), generator=generator)), dim=1)
    direction = torch.randint(4, (envs,), generator=generator)
    carried = torch.tensor([[EMPTY, 0, 0, 0], [KEY, 4, 0, 0], [BALL, 1, 0, 0], [BOX, 2, 0, 0]],
                           dtype=torch.uint8)[torch.randint(4, (envs,), generator=generator)]
    return grid, position, direction, carried


@pytest.mark.parametrize("see_through_walls", [False, True])
@pytest.mark.parametrize("size", [3, 5, 7, TABLE_VIEW, TABLE_VIEW + 2])
def test_compiled_view_equals_the_tensor_ops(size: int, see_through_walls: bool) -> None:
    """Views of random worlds, near their edges and far from them."""
    generator = torch.Generator().manual_seed(size)
    for width, height in ((5, 5), (8, 6), (16, 16)):
        world = random_worlds(256, width, height, generator)
        got = egocentric_image(*world, size, see_through_walls=see_through_walls)
        with tensor_ops():
            expected = egocentric_image(*world, size, see_through_walls=see_through_walls)
        assert torch.equal(got, expected), (width, height)


def test_compiled_moves_equal_the_tensor_ops() -> None:
    """Every action from random worlds (doors of every state in front, keys of the right colour
    and of others carried): the same worlds, agents, carried objects, goals and lava after."""
    generator = torch.Generator().manual_seed(0)
    for action in range(len(ACTION_WEIGHTS)):
        grid, position, direction, carried = random_worlds(512, 6, 6, generator)
        envs = [DoorKey(512, size=6) for _ in range(2)]
        for env in envs:
            env.grid, env.agent_pos, env.agent_dir = grid.clone(), position, direction
            env.carrying = carried.clone()
        actions = torch.full((512,), action)
        moved = envs[0]._move(actions)
        with tensor_ops():
            expected = envs[1]._move(actions)
        assert all(torch.equal(a, b) for a, b in zip(moved, expected, strict=True)), action
        for name in STATE:
            assert torch.equal(getattr(envs[0], name), getattr(envs[1], name)), (action, name)


def test_an_action_out_of_range_is_refused() -> None:
    envs = EnvOptions().make_vector("DoorKey-5x5", 4, backend="tensor", device="cpu")
    envs.reset(seed=0)
    with pytest.raises(RuntimeError, match=r"env 2 was given action 7, not one of 0\.\.6"):
        envs.step(torch.tensor([0, 1, 7, 2]))

"""Per-environment resets are exact, for every registered cell: a batch with random resets
computes what each episode computes alone, from a zero state, in float64 to 1e-12.

The resets cover several episodes per env, a reset at ``t = 0`` that discards a non-zero
incoming state, and episodes of length 1.
"""

from __future__ import annotations

import pytest
import torch

from rlmem.cells import CELLS, make_cell

T, B, IN, H = 24, 4, 3, 6


def episodes_of(resets: torch.Tensor, env: int) -> list[tuple[int, int]]:
    """The ``[start, end)`` spans of env ``env``'s episodes (the first may continue one)."""
    starts = [0, *[t for t in range(1, resets.shape[0]) if resets[t, env]]]
    return list(zip(starts, [*starts[1:], resets.shape[0]], strict=True))


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("seed", [0, 1])
def test_a_batch_with_resets_equals_each_episode_alone(name: str, seed: int) -> None:
    torch.manual_seed(seed)
    cell = make_cell(name, input_size=IN, hidden_size=H).double()
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, IN, generator=generator, dtype=torch.float64)
    resets = torch.rand(T, B, generator=generator) < 0.25
    resets[0, 0] = True                 # discards the non-zero incoming state
    resets[1:3, 1] = True               # two episodes of length 1
    resets[:, 2] = False                # one env continues its episode throughout
    with torch.no_grad():
        _, incoming = cell(torch.randn(5, B, IN, generator=generator, dtype=torch.float64))
        y, final = cell(x, incoming, resets)

    for env in range(B):
        for start, end in episodes_of(resets, env):
            fresh = bool(resets[start, env])
            state = (cell.initial_state(1, dtype=torch.float64) if fresh
                     else type(incoming)(*(value[env:env + 1] for value in incoming)))
            with torch.no_grad():
                y_alone, state_alone = cell(x[start:end, env:env + 1], state)
            torch.testing.assert_close(y[start:end, env:env + 1], y_alone, rtol=0, atol=1e-12,
                                       msg=f"{name}: env {env}, steps {start}-{end}")
        for key, value in final._asdict().items():  # the last episode's state
            alone = getattr(state_alone, key)
            if value.is_floating_point():
                torch.testing.assert_close(value[env:env + 1], alone, rtol=0, atol=1e-12,
                                           msg=f"{name}: final state.{key}, env {env}")
            else:
                assert torch.equal(value[env:env + 1], alone), (name, key, env)

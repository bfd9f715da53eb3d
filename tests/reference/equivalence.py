"""Checking a fast cell against its frozen reference: float64 outputs, states and gradients.

The two run from the same weights on the same inputs, with random per-environment resets that
exercise every edge a time loop can get wrong: several episodes per env, a reset at ``t = 0``
that discards a non-zero incoming state, episodes of length 1, and (through ``steps``) buffers
that overflow. The fast cell runs in chunks, carrying its state across them, as PPO and the
rollout do, and so does the reference.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor

from reference.base import Cell as ReferenceCell
from rlmem.cells import Cell


def random_resets(steps: int, batch: int, generator: torch.Generator) -> Tensor:
    """``(steps, batch)`` bool resets: env 0 resets at ``t = 0`` and has an episode of length 1,
    env 1 never resets, the others reset at random (about one step in six)."""
    resets = torch.rand(steps, batch, generator=generator) < 1 / 6
    resets[:, 1 % batch] = False
    resets[0, 0] = True
    if steps > 3:
        resets[1:3, 0] = True  # episodes of length 1 at t = 0 and t = 1
    return resets


def _float_fields(state: Any) -> list[Tensor]:
    return [value for value in state if value.is_floating_point()]


def assert_matches_reference(fast: Cell, reference: ReferenceCell | Cell, *, steps: int = 48,
                             batch: int = 5, chunks: Sequence[int] = (1, 16, 31),
                             warmup: int = 7, seed: int = 0, tolerance: float = 1e-10,
                             state_view: Callable[[Any], dict[str, Tensor]] | None = None
                             ) -> None:
    """Assert that ``fast`` computes what ``reference`` computes, to ``tolerance``.

    Both are cast to float64 and given the reference's weights (``load_state_dict``: the fast
    cell keeps the reference's parameter names). A warm-up of ``warmup`` steps gives a non-zero
    incoming state; then both run ``steps`` steps under :func:`random_resets`, the fast cell cut
    into the same chunks at the offsets ``chunks``. Compared: outputs, aux losses, the final state
    (through ``state_view``, by default the fields by name), and the gradients of a random
    projection of all of them with respect to every parameter, the inputs and the incoming
    state's float fields.
    """
    generator = torch.Generator().manual_seed(seed)
    reference = reference.double()
    fast = fast.double()
    fast.load_state_dict(reference.state_dict())
    inputs = reference.input_size
    prefix = torch.randn(warmup, batch, inputs, generator=generator, dtype=torch.float64)
    x = torch.randn(steps, batch, inputs, generator=generator, dtype=torch.float64)
    resets = random_resets(steps, batch, generator)
    view = state_view or (lambda state: state._asdict())

    with torch.no_grad():
        _, reference_start = reference(prefix)
        _, fast_start = fast(prefix)

    def run(cell: Cell | ReferenceCell, start: Any,
            cuts: Sequence[int]) -> tuple[Tensor, Any, Tensor, Tensor, list[Tensor]]:
        x_leaf = x.clone().requires_grad_()
        fields = [value.clone().requires_grad_() if value.is_floating_point() else value
                  for value in start]
        state = type(start)(*fields)
        outputs, aux = [], torch.zeros((), dtype=torch.float64)
        bounds = [0, *[cut for cut in cuts if 0 < cut < steps], steps]
        for begin, end in itertools.pairwise(bounds):
            out = cell.forward_aux(x_leaf[begin:end], state, resets[begin:end])
            outputs.append(out.output)
            aux = aux + out.aux.total_loss()
            state = out.state
        return torch.cat(outputs), state, aux, x_leaf, _float_fields(type(start)(*fields))

    # Both in the same chunks: an aux loss such as TARNN's Ω is counted once per call.
    y_ref, state_ref, aux_ref, x_ref, start_ref = run(reference, reference_start, chunks)
    y_fast, state_fast, aux_fast, x_fast, start_fast = run(fast, fast_start, chunks)

    def close(a: Tensor, b: Tensor, what: str) -> None:
        torch.testing.assert_close(a, b, rtol=0, atol=tolerance, msg=lambda m: f"{what}: {m}")

    close(y_fast, y_ref, "outputs")
    close(torch.as_tensor(aux_fast, dtype=torch.float64),
          torch.as_tensor(aux_ref, dtype=torch.float64), "aux losses")
    ref_fields, fast_fields = view(state_ref), view(state_fast)
    assert ref_fields.keys() == fast_fields.keys(), (ref_fields.keys(), fast_fields.keys())
    for key in ref_fields:
        if ref_fields[key].is_floating_point():
            close(fast_fields[key], ref_fields[key], f"final state.{key}")
        else:
            assert torch.equal(fast_fields[key], ref_fields[key]), f"final state.{key}"

    projection = torch.Generator().manual_seed(seed + 1)
    def objective(y: Tensor, aux: Tensor, state: Any) -> Tensor:
        total = (y * torch.randn(y.shape, generator=projection, dtype=y.dtype)).sum() + aux
        for value in _float_fields(state):
            total = total + (value * torch.randn(value.shape, generator=projection,
                                                 dtype=value.dtype)).sum()
        return total

    # The same projection for both: regenerate it from the same seed.
    ref_objective = objective(y_ref, aux_ref, [ref_fields[k] for k in sorted(ref_fields)])
    projection.manual_seed(seed + 1)
    fast_objective = objective(y_fast, aux_fast, [fast_fields[k] for k in sorted(fast_fields)])
    ref_names, ref_params = zip(*reference.named_parameters(), strict=True)
    fast_by_name = dict(fast.named_parameters())
    fast_params = [fast_by_name[name] for name in ref_names]
    ref_grads = torch.autograd.grad(ref_objective, [x_ref, *start_ref, *ref_params],
                                    allow_unused=True)
    fast_grads = torch.autograd.grad(fast_objective, [x_fast, *start_fast, *fast_params],
                                     allow_unused=True)
    names = ["x", *[f"incoming state[{i}]" for i in range(len(start_ref))], *ref_names]
    for name, a, b in zip(names, fast_grads, ref_grads, strict=True):
        a = torch.zeros(()) if a is None else a
        b = torch.zeros(()) if b is None else b
        close(a.double().expand_as(b) if b.dim() else a.double(), b.double(),
              f"gradient of {name}")

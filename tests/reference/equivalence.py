"""Checking a cell against a reference: float64 outputs, states, traces and gradients.

The reference is a frozen copy of rlmem 0.1's cell
(``tests/cells/test_reference_equivalence.py``) or the cell's own ``scan(step)``
(``tests/cells/test_engines.py``). The two run from the same weights on the same inputs, with
random per-environment resets that exercise every edge a time loop can get wrong: several
episodes per env, a reset at ``t = 0`` that discards a non-zero incoming state, episodes of
length 1, and (through ``steps``) buffers that overflow. The cell runs in chunks, carrying its
state across them, as PPO and the rollout do, and so does the reference.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from torch import Tensor

from reference.base import Cell as ReferenceCell
from rlmem.cells import Cell
from rlmem.cells._engines import compiled, gpu

LOOPS = ("compiled", "python")
"""The two implementations of the engines' hand-written loops: ``rlmem/cells/_engines/csrc``
(built at first use) and the Python loops it replaces. Both must equal the reference."""


def use_loops(loops: str, monkeypatch: pytest.MonkeyPatch, device: str = "cpu") -> None:
    """Run the rest of a test with the compiled loops (``"compiled"``; skipped where the
    environment disables them), with their Python fallback (``"python"``, the Triton kernels
    off), or with the Triton kernels (``"triton"``: through Triton's interpreter on the CPU;
    skipped where Triton is not installed)."""
    if loops == "triton":
        if not gpu.triton_installed():
            pytest.skip("Triton is not installed")
        if device == "cpu":
            monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
            monkeypatch.setenv(gpu.VARIABLE, "interpret")
            monkeypatch.setenv("TRITON_INTERPRET", "1")
        else:
            monkeypatch.setenv(gpu.VARIABLE, "auto")
    elif loops == "python":
        monkeypatch.setenv(compiled.DISABLE_VARIABLE, "1")
        monkeypatch.setenv(gpu.VARIABLE, "0")
    elif not compiled.enabled():
        pytest.skip(f"{compiled.DISABLE_VARIABLE} is set")
    else:
        assert compiled.ops(torch.zeros(1)) is not None, "the compiled loops did not build"


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
                             state_view: Callable[[Any], dict[str, Tensor]] | None = None,
                             traces: bool = False, device: str = "cpu") -> int:
    """Assert that ``fast`` computes what ``reference`` computes, to ``tolerance``.

    Both are cast to float64 and given the reference's weights (``load_state_dict``: the fast
    cell keeps the reference's parameter names). A warm-up of ``warmup`` steps gives a non-zero
    incoming state; then both run ``steps`` steps under :func:`random_resets`, the fast cell cut
    into the same chunks at the offsets ``chunks``. Compared: outputs, aux losses, the final state
    (through ``state_view``, by default the fields by name), and the gradients of a random
    projection of all of them with respect to every parameter, the inputs and the incoming
    state's float fields; with ``traces``, also every chunk's traces and diagnostics. On
    ``device``, with the inputs drawn on the CPU. Returns the number of calls made on ``fast``.
    """
    generator = torch.Generator().manual_seed(seed)
    reference = reference.double()
    fast = fast.double()
    fast.load_state_dict(reference_weights(fast, reference))
    reference, fast = reference.to(device), fast.to(device)
    inputs = reference.input_size
    prefix = torch.randn(warmup, batch, inputs, generator=generator,
                         dtype=torch.float64).to(device)
    x = torch.randn(steps, batch, inputs, generator=generator, dtype=torch.float64).to(device)
    resets = random_resets(steps, batch, generator).to(device)
    view = state_view or (lambda state: state._asdict())

    with torch.no_grad():
        _, reference_start = reference(prefix)
        _, fast_start = fast(prefix)

    bounds = bounds_of(chunks, steps)

    def run(cell: Cell | ReferenceCell, start: Any
            ) -> tuple[Tensor, Any, Tensor, Tensor, list[Tensor], list[dict[str, Tensor]]]:
        x_leaf = x.clone().requires_grad_()
        fields = [value.clone().requires_grad_() if value.is_floating_point() else value
                  for value in start]
        state = type(start)(*fields)
        outputs, aux = [], torch.zeros((), dtype=torch.float64, device=device)
        observed = []
        for begin, end in itertools.pairwise(bounds):
            out = cell.forward_aux(x_leaf[begin:end], state, resets[begin:end])
            outputs.append(out.output)
            aux = aux + out.aux.total_loss()
            state = out.state
            if traces:
                observed.append({**{f"trace {key}": value
                                    for key, value in out.aux.traces.items()},
                                 **{f"diagnostic {key}": value
                                    for key, value in out.aux.diagnostics.items()}})
        return (torch.cat(outputs), state, aux, x_leaf, _float_fields(type(start)(*fields)),
                observed)

    # Both in the same chunks: an aux loss such as TARNN's Ω is counted once per call.
    y_ref, state_ref, aux_ref, x_ref, start_ref, observed_ref = run(reference, reference_start)
    y_fast, state_fast, aux_fast, x_fast, start_fast, observed_fast = run(fast, fast_start)

    def close(a: Tensor, b: Tensor, what: str) -> None:
        assert_close(a, b, what, tolerance)

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
    for chunk, (got, want) in enumerate(zip(observed_fast, observed_ref, strict=True)):
        assert_same_tensors(got, want, f"chunk {chunk}", tolerance)

    projection = torch.Generator().manual_seed(seed + 1)
    def objective(y: Tensor, aux: Tensor, state: Any) -> Tensor:
        total = (y * torch.randn(y.shape, generator=projection, dtype=y.dtype).to(device)).sum()
        total = total + aux
        for value in _float_fields(state):
            total = total + (value * torch.randn(value.shape, generator=projection,
                                                 dtype=value.dtype).to(device)).sum()
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
        a = torch.zeros((), device=device) if a is None else a
        b = torch.zeros((), device=device) if b is None else b
        close(a.double().expand_as(b) if b.dim() else a.double(), b.double(),
              f"gradient of {name}")
    return len(bounds)  # the warm-up and one call per chunk


def reference_weights(fast: Cell, reference: ReferenceCell | Cell) -> dict[str, Any]:
    """``reference``'s state dict, for ``fast`` to load: its parameters and buffers, and
    ``fast``'s own extra states (``get_extra_state``, such as iRNN's update rule), which the
    frozen references predate. Any other key missing from either side still fails the load."""
    own_extra = {key: value for key, value in fast.state_dict().items()
                 if key.endswith("_extra_state")}
    return {**own_extra, **reference.state_dict()}


def bounds_of(chunks: Sequence[int], steps: int) -> list[int]:
    """The chunk boundaries that :func:`assert_matches_reference` cuts ``steps`` steps at."""
    return [0, *[cut for cut in chunks if 0 < cut < steps], steps]


def assert_close(a: Tensor, b: Tensor, what: str, tolerance: float) -> None:
    """``a`` equals ``b`` to ``tolerance`` (absolute), the failure naming ``what``."""
    torch.testing.assert_close(a, b, rtol=0, atol=tolerance, msg=lambda m: f"{what}: {m}")


def assert_same_tensors(got: dict[str, Tensor], want: dict[str, Tensor], where: str,
                        tolerance: float = 1e-10) -> None:
    """The same keys, shapes and dtypes; floats to ``tolerance``, the rest exactly."""
    assert got.keys() == want.keys(), (where, sorted(got), sorted(want))
    for key, value in want.items():
        other = got[key]
        assert other.shape == value.shape and other.dtype == value.dtype, (
            where, key, other.shape, value.shape, other.dtype, value.dtype)
        if value.is_floating_point():
            assert_close(other, value, f"{where}, {key}", tolerance)
        else:
            assert torch.equal(other, value), (where, key)


def assert_matches_without_grad(fast: Cell, reference: Cell, *, chunk: int, steps: int = 24,
                                warmup: int = 6, batch: int = 5, seed: int = 0,
                                tolerance: float = 1e-10, device: str = "cpu") -> int:
    """Assert that ``fast`` computes what ``reference`` computes without autograd (a rollout,
    ``chunk`` = 1, or an evaluation), to ``tolerance``: the outputs, states, traces and
    diagnostics of every call, in float64 on ``device``. Both run ``warmup + steps`` steps
    under :func:`random_resets` in calls of ``chunk`` steps, feeding their state back. Returns
    the number of calls made on ``fast``.
    """
    generator = torch.Generator().manual_seed(seed)
    fast = fast.double()
    fast.load_state_dict(reference_weights(fast, reference))
    reference, fast = reference.double().to(device), fast.to(device)
    total = warmup + steps
    x = torch.randn(total, batch, reference.input_size, generator=generator,
                    dtype=torch.float64).to(device)
    resets = random_resets(total, batch, generator).to(device)
    fast_state = fast.initial_state(batch, device=device, dtype=torch.float64)
    reference_state = reference.initial_state(batch, device=device, dtype=torch.float64)
    calls = 0
    with torch.no_grad():
        for begin in range(0, total, chunk):
            end = min(begin + chunk, total)
            got = fast.forward_aux(x[begin:end], fast_state, resets[begin:end])
            want = reference.forward_aux(x[begin:end], reference_state, resets[begin:end])
            calls += 1
            where = f"steps {begin}-{end}"
            assert_same_tensors({"output": got.output, **got.state._asdict(),
                                 **{f"trace {k}": v for k, v in got.aux.traces.items()},
                                 **{f"diagnostic {k}": v
                                    for k, v in got.aux.diagnostics.items()}},
                                {"output": want.output, **want.state._asdict(),
                                 **{f"trace {k}": v for k, v in want.aux.traces.items()},
                                 **{f"diagnostic {k}": v
                                    for k, v in want.aux.diagnostics.items()}},
                                where, tolerance)
            fast_state, reference_state = got.state, want.state
    return calls

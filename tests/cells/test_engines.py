"""Which engine runs which cell, each proven equal to the cell's own step: one table.

A cell's specification is ``scan(step)``: :func:`rlmem.cells.time_loop.scan` over its
:meth:`~rlmem.cells.base.Cell.step`. An engine (:mod:`rlmem.cells._engines`) computes the same
faster, behind :meth:`~rlmem.cells.base.Cell.fast_scan`. :data:`ENGINES` lists every (cell,
options, way of calling it) and the engine function that computes it. Each row is checked in
float64 against the same cell, with the same weights, whose ``fast_scan`` returns ``None``, so
that it runs ``scan(step)``; under random per-env resets (several per env, one at ``t = 0``
discarding a non-zero incoming state, episodes of length 1), from a non-zero incoming state, in
chunks that carry the state across:

- :attr:`Mode.TRAIN`: chunks of 1, 15, 15 and 17 steps under autograd (1, 7, 7 and 9 through
  Triton's interpreter, which runs each program in Python). Compared: outputs, aux
  losses, final states, every chunk's traces and diagnostics, and the gradients of the inputs,
  of the incoming state and of every parameter.
- :attr:`Mode.EVALUATE`, :attr:`Mode.SHORT`, :attr:`Mode.ROLLOUT`: calls of 8, 3 and 1 steps
  without autograd (an evaluation, a few steps, a rollout's acting step). Compared: every
  call's outputs, state, traces and diagnostics.

Each row also checks that its engine function computed every call. It runs on the CPU with
the compiled loops and with their Python fallback (:class:`Loops` says which the row needs),
and on CUDA when torch has it (with the Python loops: the compiled ones are CPU-only). A row
whose engine has Triton kernels (``triton=True``, :mod:`rlmem.cells._engines.gpu`) runs with
them too: on the CPU through Triton's interpreter, and on CUDA; the row then checks that the
kernels computed its chunks.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

import pytest
import torch
from reference.equivalence import (
    assert_matches_reference,
    assert_matches_without_grad,
    random_resets,
    use_loops,
)

from rlmem.cells import CELLS, Cell, Stacked, make_cell
from rlmem.cells._engines import (
    ernn,
    full_attention,
    fused_rnn,
    gpu,
    irnn,
    sarnn,
    screened,
    tarnn,
)
from rlmem.cells.deltanet import DeltaNet
from rlmem.cells.gru import GRU
from rlmem.cells.gtrxl import GTrXL
from rlmem.cells.irnn import IRNNUpdate
from rlmem.cells.linear_recurrence import LinearRecurrence
from rlmem.cells.memlstm import MemLSTM
from rlmem.cells.relrnn import BaseNonlinearity
from rlmem.cells.screening import Readout, RelevancyScreening, Screening

INPUT, HIDDEN = 3, 6


class Mode(Enum):
    """How a row calls the cell."""

    TRAIN = 0
    """Chunks of 1, 15, 15 and 17 steps under autograd; gradients compared."""
    EVALUATE = 8
    """Calls of 8 steps without autograd."""
    SHORT = 3
    """Calls of 3 steps without autograd."""
    ROLLOUT = 1
    """Calls of 1 step without autograd: a rollout's acting step."""


class Loops(Enum):
    """Which implementation of the compiled loops a row's engine needs."""

    ANY = "any"
    """Either: the row runs with each (on the CPU)."""
    COMPILED = "compiled"
    """The compiled loops (``rlmem/cells/_engines/csrc``): the CPU only."""
    PYTHON = "python"
    """Their Python fallback, where the compiled loops are disabled or off the CPU."""


@dataclass(frozen=True)
class Row:
    """A cell with options, called in one way, and the engine function that computes it."""

    cell: str
    options: dict[str, Any]
    mode: Mode
    engine: Callable[..., Any]
    loops: Loops = Loops.ANY
    sharpen: float | None = None
    """Scale the attention's score vector v_a by this much. At random init attention is
    nearly uniform, so the first ρ states keep the highest relevance and R never replaces a
    member; peaked attention makes later states enter R and exercises the screening."""
    layers: int = 1
    triton: bool = False
    """Whether the engine has Triton kernels (:mod:`rlmem.cells._engines.gpu`) for this row:
    it then also runs with them, through the interpreter on the CPU and on CUDA."""


NU3_RHO2 = {"short_term": 3, "relevant": 2}
NU2_RHO2 = {"short_term": 2, "relevant": 2}
NORMALISED = {"screening": Screening.normalised}
AUTHORS = {"readout": Readout.authors_code}
SHARP = 30.0
T, E, S, R = Mode.TRAIN, Mode.EVALUATE, Mode.SHORT, Mode.ROLLOUT
COMPILED, PYTHON = Loops.COMPILED, Loops.PYTHON

ENGINES: list[Row] = [
    # LSTM and GRU: torch's fused kernels, one call per reset-free segment.
    Row("lstm", {}, T, fused_rnn.lstm),
    Row("lstm", {"forget_bias": None, "chrono_t_max": 10}, T, fused_rnn.lstm),
    Row("lstm", {}, R, fused_rnn.lstm),
    Row("gru", {"update_bias": 1.0}, T, GRU.fast_scan),  # the CPU's chunk, or fused_rnn.gru
    Row("gru", {}, R, GRU.fast_scan),
    # MemLSTM: the chunk engine; the compiled rollout step; else the step (the textbook form).
    # (capacity 8 first: the interpreter's default row, a third faster than capacity 64's)
    Row("memlstm", {"capacity": 8}, T, full_attention.full_scan, sharpen=SHARP,  # overflows
        triton=True),
    Row("memlstm", {"capacity": 64}, T, full_attention.full_scan, triton=True),
    Row("memlstm", {"capacity": 8}, E, full_attention.full_scan, sharpen=SHARP, triton=True),
    Row("memlstm", {"capacity": 64}, S, MemLSTM.step),
    Row("memlstm", {"capacity": 8}, R, full_attention.full_step, COMPILED, sharpen=SHARP,
        triton=True),
    Row("memlstm", {"capacity": 8}, R, MemLSTM.step, PYTHON, sharpen=SHARP),
    # ReLSTM and ReLRNN: the chunk engine (both screenings); the compiled rollout step
    # (Algorithm 1's); else the step, its weights built once per call.
    Row("relstm", NU3_RHO2, T, screened.screened_scan, triton=True),
    Row("relstm", {"short_term": 1, "relevant": 1}, T, screened.screened_scan, triton=True),
    Row("relstm", NU2_RHO2, T, screened.screened_scan, sharpen=SHARP, triton=True),
    Row("relstm", NU3_RHO2 | NORMALISED, T, screened.screened_scan, sharpen=SHARP, triton=True),
    Row("relstm", {"short_term": 2, "relevant": 1} | NORMALISED, T, screened.screened_scan,
        sharpen=SHARP, triton=True),
    Row("relstm", NU2_RHO2, E, screened.screened_scan, sharpen=SHARP, triton=True),
    Row("relstm", NU3_RHO2 | NORMALISED, E, screened.screened_scan, sharpen=SHARP, triton=True),
    Row("relstm", NU2_RHO2, S, RelevancyScreening.step, sharpen=SHARP),
    Row("relstm", NU2_RHO2, R, screened.screened_step, COMPILED, sharpen=SHARP, triton=True),
    Row("relstm", NU2_RHO2, R, RelevancyScreening.step, PYTHON, sharpen=SHARP),
    Row("relstm", NU3_RHO2 | NORMALISED, R, RelevancyScreening.step, sharpen=SHARP),
    Row("relstm", NU2_RHO2 | AUTHORS, T, RelevancyScreening.step, sharpen=SHARP),
    Row("relstm", NU2_RHO2 | AUTHORS, R, RelevancyScreening.step, sharpen=SHARP),
    Row("relrnn", {"short_term": 4, "relevant": 3}, T, screened.screened_scan, sharpen=SHARP,
        triton=True),
    Row("relrnn", NU3_RHO2 | NORMALISED, T, screened.screened_scan, sharpen=SHARP, triton=True),
    Row("relrnn", {"short_term": 4, "relevant": 3}, R, screened.screened_step, COMPILED,
        sharpen=SHARP, triton=True),
    Row("relrnn", {"short_term": 4, "relevant": 3}, R, RelevancyScreening.step, PYTHON,
        sharpen=SHARP),
    Row("relrnn", NU2_RHO2 | {"nonlinearity": BaseNonlinearity.modrelu}, T,
        RelevancyScreening.step, sharpen=SHARP),
    Row("relrnn", NU2_RHO2 | AUTHORS, T, RelevancyScreening.step, sharpen=SHARP),
    # TARNN and SA-RNN: the loop without autograd and its hand-written backward.
    Row("tarnn", {}, T, tarnn.fast_scan, triton=True),
    Row("tarnn", {"K": 2, "A": "coupled", "nonlinearity": "relu", "gamma1": 0.1,
                  "gamma2": 0.2}, T, tarnn.fast_scan, triton=True),
    Row("tarnn", {"nonlinearity": "sigmoid"}, T, tarnn.fast_scan, triton=True),
    Row("tarnn", {}, R, tarnn.fast_scan, triton=True),
    Row("sarnn", {}, T, sarnn.fast_scan, triton=True),
    Row("sarnn", {"lam": 1e-2}, T, sarnn.fast_scan, triton=True),
    Row("sarnn", {}, R, sarnn.fast_scan, triton=True),
    # iRNN and ERNN: the loop under autograd, products shared across steps.
    Row("irnn", {}, T, irnn.fast_scan, triton=True),
    Row("irnn", {"K": 3, "eta": 0.3, "nonlinearity": "tanh"}, T, irnn.fast_scan, triton=True),
    Row("irnn", {"K": 2, "rank": 2}, T, irnn.fast_scan, triton=True),
    Row("irnn", {"K": 2, "update_rule": IRNNUpdate.eq5, "learn_alpha": True}, T,
        irnn.fast_scan, triton=True),
    Row("irnn", {"K": 2, "rank": 2}, R, irnn.fast_scan, triton=True),
    Row("ernn", {}, T, ernn.fast_scan, triton=True),
    Row("ernn", {"K": 3, "eta": 0.4, "nonlinearity": "tanh"}, T, ernn.fast_scan, triton=True),
    Row("ernn", {}, R, ernn.fast_scan, triton=True),
    # LRU, FFM: the associative scan over the chunk.
    Row("lru", {}, T, LinearRecurrence.fast_scan),
    Row("lru", {"N": 4, "r_min": 0.9, "r_max": 0.999}, E, LinearRecurrence.fast_scan),
    Row("ffm", {}, T, LinearRecurrence.fast_scan),
    Row("ffm", {"memory_size": 3, "context_size": 2, "max_period": 8.0}, E,
        LinearRecurrence.fast_scan),
    # DeltaNet: the chunkwise (WY) form, one triangular solve per block.
    Row("deltanet", {"heads": 2}, T, DeltaNet.fast_scan),
    Row("deltanet", {"heads": 3, "head_size": 4}, E, DeltaNet.fast_scan),
    Row("deltanet", {}, R, DeltaNet.fast_scan),
    # GTrXL: every layer once over the chunk, the window and the chunk under one mask.
    Row("gtrxl", {"heads": 2, "window": 5}, T, GTrXL.fast_scan),
    Row("gtrxl", {"heads": 3, "window": 64, "layers": 1}, T, GTrXL.fast_scan),
    Row("gtrxl", {"heads": 2, "window": 3}, E, GTrXL.fast_scan),
    Row("gtrxl", {"heads": 2, "window": 3}, R, GTrXL.fast_scan),
    # Stacks: layer after layer over the chunk, each layer through its own engine.
    Row("lstm", {}, T, Stacked.fast_scan, layers=2),
    Row("relstm", NU2_RHO2, T, Stacked.fast_scan, layers=2, triton=True),
    Row("sarnn", {}, T, Stacked.fast_scan, layers=2),
    Row("memlstm", {"capacity": 16}, R, Stacked.fast_scan, layers=2),
]
"""Every (cell, options, mode) and the engine function that computes it."""


def row_id(row: Row) -> str:
    options = ",".join(f"{key}={getattr(value, 'name', value)}"
                       for key, value in row.options.items())
    layers = f"*{row.layers}" if row.layers > 1 else ""
    return (f"{row.cell}{layers}[{options}]-{row.mode.name.lower()}-"
            f"{row.engine.__module__.rsplit('.', 1)[-1]}.{row.engine.__qualname__}")


def cases() -> list[Any]:
    """Each row on the CPU with each implementation of the loops it runs with, and on CUDA.

    Through Triton's interpreter a row takes seconds, so the default suite runs the
    interpreter on each cell's first row of each kind (a chunk under autograd, a call without)
    and the others under ``-m slow``; on CUDA every row runs."""
    params = []
    interpreted: set[tuple[str, bool]] = set()
    for row in ENGINES:
        loops = ["compiled", "python"] if row.loops is Loops.ANY else [row.loops.value]
        params += [pytest.param(row, "cpu", kind, id=f"{row_id(row)}-cpu-{kind}")
                   for kind in loops]
        cuda = [] if row.loops is Loops.COMPILED else ["python"]
        if row.triton:
            kind_of_call = (row.cell, row.mode is Mode.TRAIN)
            marks = [pytest.mark.slow] if kind_of_call in interpreted else []
            interpreted.add(kind_of_call)
            params.append(pytest.param(row, "cpu", "triton", id=f"{row_id(row)}-cpu-triton",
                                       marks=marks))
            cuda.append("triton")
        params += [pytest.param(row, "cuda", kind, id=f"{row_id(row)}-cuda-{kind}",
                                marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                         reason="no CUDA"))
                   for kind in cuda]
    return params


def build(row: Row) -> Cell:
    torch.manual_seed(0)
    cell = make_cell(row.cell, input_size=INPUT, hidden_size=HIDDEN, num_layers=row.layers,
                     **row.options)
    if row.sharpen is not None:
        assert isinstance(cell, RelevancyScreening | MemLSTM)
        with torch.no_grad():
            cell.attention.score.weight.mul_(row.sharpen)
    cell.anneal(0.5)  # SA-RNN: a slope other than 1 exercises the annealed hard sigmoid
    return cell


def count_results(engine: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Replace ``engine`` (a module's function or a class's method) by a wrapper that counts
    the calls it returns a result for; the count is the returned list's length."""
    owner_name, _, name = engine.__qualname__.rpartition(".")
    module = sys.modules[engine.__module__]
    owner = getattr(module, owner_name) if owner_name else module
    results: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        result = engine(*args, **kwargs)
        if result is not None:
            results.append(1)
        return result

    monkeypatch.setattr(owner, name, counted)
    return results


def count_kernel_chunks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record each chunk that an engine gives its Triton kernels (:func:`gpu.runs` true): the
    returned list holds the engines' names."""
    runs = gpu.runs
    taken: list[str] = []

    def recorded(like: torch.Tensor, engine: str) -> bool:
        if runs(like, engine):
            taken.append(engine)
            return True
        return False

    monkeypatch.setattr(gpu, "runs", recorded)
    return taken


def test_every_registered_cell_has_an_engine_row() -> None:
    assert {row.cell for row in ENGINES} == set(CELLS)


@pytest.mark.parametrize(("row", "device", "loops"), cases())
def test_engine_equals_the_cells_step(row: Row, device: str, loops: str,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops(loops, monkeypatch, device)
    engine, step = build(row), build(row)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)  # scan(step)
    results = count_results(row.engine, monkeypatch)
    kernels = count_kernel_chunks(monkeypatch)
    if row.mode is Mode.TRAIN:
        # Through the interpreter, half the steps: chunks of 1, 7, 7 and 9 still start at
        # t = 0, carry the state across three boundaries and cross resets.
        shorter: dict[str, Any] = ({"steps": 24, "chunks": (1, 8, 15)}
                                   if device == "cpu" and loops == "triton" else {})
        calls = assert_matches_reference(engine, step, traces=True, device=device, **shorter)
    else:
        calls = assert_matches_without_grad(engine, step, chunk=row.mode.value, device=device)
    assert len(results) >= calls, (f"{row.engine.__qualname__} computed {len(results)} of "
                                   f"the {calls} calls")
    assert (len(kernels) > 0) == (loops == "triton"), (
        f"the Triton kernels computed {len(kernels)} chunks with loops={loops}")


@pytest.mark.parametrize("name", ["relstm", "relrnn"])
def test_the_normalised_rows_exercise_the_screening(name: str) -> None:
    """The rows of ``screening=normalised`` mean something only if screening kept some states
    out of R, let others in, and replaced some (ν = 1 would admit none: a state's share is
    then exactly 1)."""
    row = next(row for row in ENGINES if row.cell == name and row.options.get("screening")
               is Screening.normalised and row.mode is Mode.TRAIN)
    cell = build(row).double()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(48, 5, INPUT, generator=generator, dtype=torch.float64)
    traces = cell.forward_aux(x, None, random_resets(48, 5, generator)).aux.traces
    admitted = traces["relevant_valid"].any(dim=2)
    assert isinstance(cell, RelevancyScreening)
    in_r = traces["slot_time"][:, :, cell.short_term:]
    replaced = (in_r[1:] != in_r[:-1]) & (in_r[:-1] >= 0)
    assert admitted.any() and not admitted.all() and replaced.any()


@pytest.mark.parametrize("loops", ["compiled", "python",
                                   pytest.param("triton", marks=pytest.mark.slow)])
def test_memlstm_chunk_from_a_detached_state(loops: str, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    """A PPO minibatch's chunk starts from a rollout's state, which needs no gradient: the
    engine then sums the incoming memory's gradient over the slots it reads only, and returns
    none. The parameters' and the inputs' gradients still equal the step's, in float64, with
    episodes of different lengths (the window is the longest one's) and resets."""
    use_loops(loops, monkeypatch)
    row = next(row for row in ENGINES if row.cell == "memlstm" and row.mode is Mode.TRAIN
               and row.options["capacity"] == 64)
    engine, step = build(row).double(), build(row).double()
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    generator = torch.Generator().manual_seed(1)
    batch = 5
    with torch.no_grad():
        prefix = torch.randn(20, batch, INPUT, generator=generator, dtype=torch.float64)
        start = engine(prefix, None, random_resets(20, batch, generator))[1]
    x = torch.randn(16, batch, INPUT, generator=generator, dtype=torch.float64)
    resets = random_resets(16, batch, generator)
    assert not any(field.requires_grad for field in start)
    grads = []
    for cell in (engine, step):
        x_leaf = x.clone().requires_grad_()
        output, _ = cell(x_leaf, start, resets)
        cell.zero_grad()
        (output * torch.linspace(-1, 1, output.numel(), dtype=torch.float64).view_as(output)
         ).sum().backward()
        grads.append([x_leaf.grad, *(p.grad for p in cell.parameters())])
    for fast, reference in zip(*grads, strict=True):
        torch.testing.assert_close(fast, reference, rtol=0, atol=1e-10)


@pytest.mark.parametrize("row", [row for row in ENGINES if row.cell in ("lstm", "gru")],
                         ids=lambda row: f"{row.cell}-{row.mode.name}-{len(row.options)}")
def test_a_batch_beyond_the_fused_kernels_bound_runs_in_slices_of_items(
        row: Row, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past :data:`~rlmem.cells._engines.fused_rnn.KERNEL_GATE_BYTES` of gates a step (about
    2M envs acting at hidden size 64, where oneDNN's LSTM cannot create its primitive), the
    kernel runs on slices of the items: the same outputs, states and gradients, with resets.
    (The GRU's kernel runs where the compiled loops do not: on the CPU they take its chunk.)"""
    if row.cell == "gru":
        use_loops("python", monkeypatch)
    gates = (4 if row.cell == "lstm" else 3) * HIDDEN
    monkeypatch.setattr(fused_rnn, "KERNEL_GATE_BYTES", 2 * gates * 8)  # 2 items in float64
    kernel = torch.lstm if row.cell == "lstm" else torch.gru
    batches: list[int] = []

    def counted(segment: torch.Tensor, *args: Any) -> Any:
        batches.append(segment.shape[1])
        return kernel(segment, *args)

    monkeypatch.setattr(torch, row.cell, counted)
    engine, step = build(row), build(row)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)  # scan(step)
    if row.mode is Mode.TRAIN:
        assert_matches_reference(engine, step, batch=5)
    else:
        assert_matches_without_grad(engine, step, chunk=row.mode.value, batch=5)
    assert batches and max(batches) == 2 and 1 in batches  # 5 items: slices of 2, 2 and 1


@pytest.mark.slow  # 2.1M items: about 3 GiB while it runs
def test_an_lstm_acts_for_more_items_than_onednn_takes_in_one_call() -> None:
    # At hidden size 64, oneDNN's LSTM raises "could not create a primitive" from about 1.97M
    # items a call: the acting step of a run of that many envs.
    cell = make_cell("lstm", input_size=2, hidden_size=64)
    items = 2_100_000
    with torch.no_grad():
        output, state = cell(torch.ones(1, items, 2), cell.initial_state(items))
        one, one_state = cell(torch.ones(1, 1, 2), cell.initial_state(1))
    assert output.shape == (1, items, 64) and state.c.shape == (items, 64)
    torch.testing.assert_close(output[0, -1], one[0, 0])  # the last slice's last item
    torch.testing.assert_close(state.c[-1], one_state.c[0])

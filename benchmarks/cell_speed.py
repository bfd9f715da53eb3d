"""Time per step of every registered cell, relative to ``lstm``: training and rollout.

    python benchmarks/cell_speed.py                        # batch 16 and 64, hidden 128, T=128
    python benchmarks/cell_speed.py --batch 16 --cells lstm tarnn sarnn
    python benchmarks/cell_speed.py --check                # exit 1 if a cell is above its bound
    python benchmarks/cell_speed.py --modes rollout --device cuda
    python benchmarks/cell_speed.py --batch 64 --modes train --cells ffm lru deltanet gtrxl
                                                           # the parallel-in-time cells
    python benchmarks/cell_speed.py --clock cpu --fallback    # on a loaded machine; and the
                                                              # Python loops beside the compiled

Two measurements, each printed as a markdown table of ms per step and the ratio to ``lstm``:

- ``train``: forward + backward over a sequence of T steps with one reset in the middle of one
  environment (so every cell takes its reset-aware path), backpropagating the sum of the outputs
  and the aux losses; seconds per time step.
- ``rollout``: the acting step of a rollout: the same sequence, one ``cell(x[t:t+1], state,
  resets[t:t+1])`` call per step under ``torch.no_grad()``, the state fed back from the
  initial state; seconds per call. So both measurements see the same episodes, which matters
  for MemLSTM, whose step attends over every state of the episode so far. (Until 2026-11-22
  the rollout fed one input back for ~500 calls without a reset, which measured MemLSTM only
  past its capacity, every step over 256 slots; the row ``memlstm (full)`` keeps that case.)

The cells are measured round-robin: every repeat times each cell once, in turn (the order
rotating from one repeat to the next), so a change in the machine's load hits all of them
alike. A cell's ratio is the median over repeats of its time divided by lstm's time in the same
repeat; its ms/step is the median of its own times. The first round warms up and is discarded.
The load average (``os.getloadavg``) is printed at start and end: a run on a loaded machine is
only comparable within itself. glibc's allocator is told to keep freed memory
(:func:`rlmem.runs.allocator.keep_freed_memory`, as the run programs do; ``--fresh-pages``
leaves it as it is): otherwise ``lstm``'s
step, whose kernel allocates its buffers afresh, paid the page faults of new memory in some
runs and not in others (0.27 against 0.41 ms at batch 64 on session 78's machine), and every
ratio moved with it. Since 2026-11-30 (session 78); the earlier tables of
``benchmarks/results/cell_speed.md`` ran without it.

``--check`` compares the ratios with the bounds below and exits with status 1 if any cell is
above its bound (cells without a bound are reported, not checked).

``--variants`` adds the rows of :data:`VARIANTS` to the train measurement: cells with options
other than their defaults (reported, not checked), such as relstm's normalised screening
through the chunk engine and through the step path it used before.

``--clock cpu`` times with the process's CPU time instead of the wall clock: on a machine
shared with other jobs, the time this process waits for a core then does not count (cache
contention still does). ``--fallback`` adds a row ``name (python)`` per cell with compiled
loops (``rlmem/cells/_engines/csrc``), timed with ``RLMEM_NO_EXTENSION=1``: the Python loops
they replace.
"""

from __future__ import annotations

import argparse
import enum
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from machine import cpu_model

from rlmem.cells import CELLS, Cell, hyperparameters, make_cell
from rlmem.cells._engines import compiled
from rlmem.cells._engines.onednn_linear import onednn_products
from rlmem.runs.allocator import keep_freed_memory

TRAIN_BOUNDS: dict[str, float] = {
    "gru": 2.0, "relstm": 2.0, "relrnn": 2.0, "tarnn": 2.0, "sarnn": 2.0, "irnn": 2.0,
    "ernn": 2.0, "memlstm": 4.0, "ffm": 1.0, "lru": 1.0, "deltanet": 1.0,
}
"""Largest allowed ratio to lstm of forward + backward per step. The associative-scan cells'
1.0 is issue 56's goal (batch 64, T=128 on the CPU); gtrxl is reported, not checked."""

VARIANTS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "relstm, screening=normalised": ("relstm", {"screening": "normalised"}, True),
    "relstm, screening=normalised, step path": ("relstm", {"screening": "normalised"}, False),
}
"""``--variants``: a row's cell, its options, and whether it may run its chunk engine (False:
the step path under autograd, forced)."""

ROLLOUT_BOUND = 2.5
"""Largest allowed ratio to lstm of one T=1 forward call, for every cell but those of
:data:`ROLLOUT_UNCHECKED`."""

ROLLOUT_UNCHECKED = ("gtrxl",)
"""Cells whose rollout step is reported, not checked: GTrXL, a stack of transformer layers
attending over its window at every step (13-15x lstm's here), which no issue bounds on the
CPU."""

BASELINE = "lstm"

COMPILED = ("tarnn", "relstm", "relrnn", "memlstm")
"""Cells whose loops ``--fallback`` also times in Python (they run
``rlmem/cells/_engines/csrc``)."""

FALLBACK = " (python)"
"""Suffix of a ``--fallback`` row's name."""


class Clock(enum.Enum):
    """What a sample's duration is measured with."""

    WALL = "wall"
    CPU = "cpu"

    def now(self) -> float:
        """Seconds, from :func:`time.perf_counter` or :func:`time.process_time`."""
        return time.perf_counter() if self is Clock.WALL else time.process_time()

Timer = Callable[[], float]
"""Runs one sample of a measurement and returns its seconds per step (or per call)."""


@dataclass
class Row:
    """One cell's result in one table."""

    cell: str
    seconds: float
    """Median seconds per step (train) or per call (rollout)."""
    ratio: float
    """Median over repeats of the cell's time over the baseline's time in the same repeat."""
    bound: float | None


def synchronize(device: torch.device) -> None:
    """Wait for queued kernels, so that a wall-clock interval covers the work it started."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(name: str, batch: int, hidden: int, steps: int, device: torch.device,
          **options: Any) -> tuple[Cell, torch.Tensor, torch.Tensor]:
    """A cell with its default hyperparameters (but ``options``), inputs
    ``(steps, batch, hidden)`` and resets with one reset in the middle of environment 0."""
    torch.manual_seed(0)
    cell = make_cell(name, input_size=hidden, hidden_size=hidden, **options).to(device)
    x = torch.randn(steps, batch, hidden, device=device)
    resets = torch.zeros(steps, batch, dtype=torch.bool, device=device)
    resets[steps // 2, 0] = True
    return cell, x, resets


def train_timer(cell: Cell, x: torch.Tensor, resets: torch.Tensor,
                clock: Clock = Clock.WALL) -> Timer:
    """Seconds per time step of one forward + backward over the whole sequence."""

    def sample() -> float:
        synchronize(x.device)
        start = clock.now()
        out = cell.forward_aux(x, None, resets)
        (out.output.sum() + out.aux.total_loss()).backward()
        synchronize(x.device)
        seconds = clock.now() - start
        cell.zero_grad(set_to_none=True)
        return seconds / x.shape[0]

    return sample


def rollout_timer(cell: Cell, x: torch.Tensor, resets: torch.Tensor,
                  clock: Clock = Clock.WALL, warmup: int = 0) -> Timer:
    """Seconds per call of the rollout step: the train measurement's sequence acted one step at
    a time, ``cell(x[t:t+1], state, resets[t:t+1])`` for every ``t`` under ``torch.no_grad()``,
    the state fed back, from the initial state (or from the state after ``warmup`` steps
    without a reset)."""
    with torch.no_grad():
        start_state = cell.initial_state(x.shape[1], device=x.device, dtype=x.dtype)
        if warmup:
            _, start_state = cell(torch.randn(warmup, *x.shape[1:], device=x.device),
                                  start_state)

    def sample() -> float:
        state = start_state
        with torch.no_grad():
            synchronize(x.device)
            start = clock.now()
            for t in range(x.shape[0]):
                _, state = cell(x[t:t + 1], state, resets[t:t + 1])
            synchronize(x.device)
            return (clock.now() - start) / x.shape[0]

    return sample


def python_loops(timer: Timer) -> Timer:
    """``timer`` with the compiled loops disabled (``RLMEM_NO_EXTENSION=1``) while it runs."""

    def sample() -> float:
        previous = os.environ.get(compiled.DISABLE_VARIABLE)
        os.environ[compiled.DISABLE_VARIABLE] = "1"
        try:
            return timer()
        finally:
            if previous is None:
                del os.environ[compiled.DISABLE_VARIABLE]
            else:
                os.environ[compiled.DISABLE_VARIABLE] = previous

    return sample


def with_fallback(timers: dict[str, Timer], make: Callable[[str], Timer]) -> dict[str, Timer]:
    """``timers`` and, for each cell with compiled loops, ``name (python)`` timing the Python
    loops (on a timer of its own from ``make``)."""
    extra = {name + FALLBACK: python_loops(make(name)) for name in timers if name in COMPILED}
    return {**timers, **extra}


def round_robin(timers: dict[str, Timer], repeats: int) -> dict[str, list[float]]:
    """Each repeat runs every timer once, in turn; the first (warm-up) round is discarded.

    The order rotates by one cell per repeat, so that no cell always follows the same one
    (what ran before leaves the caches and the allocator in its own state).
    """
    samples: dict[str, list[float]] = {name: [] for name in timers}
    names = list(timers)
    for repeat in range(repeats + 1):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            seconds = timers[name]()
            if repeat:
                samples[name].append(seconds)
    return samples


def summarise(samples: dict[str, list[float]],
              bound: Callable[[str], float | None]) -> list[Row]:
    """Per cell: median time, and the median of its per-repeat ratios to the baseline."""
    baseline = samples[BASELINE]
    rows = [Row(name, statistics.median(times),
                statistics.median(t / b for t, b in zip(times, baseline, strict=True)),
                bound(name))
            for name, times in samples.items()]
    return sorted(rows, key=lambda row: row.ratio)


def measure_train(names: Sequence[str], batch: int, hidden: int, steps: int, repeats: int,
                  device: torch.device, clock: Clock = Clock.WALL,
                  fallback: bool = False, variants: bool = False) -> list[Row]:
    """Forward + backward per step, at ``steps`` steps per sequence."""
    def make(name: str) -> Timer:
        return train_timer(*build(name, batch, hidden, steps, device), clock)

    def make_variant(row: str) -> Timer:
        name, options, engine = VARIANTS[row]
        cell, x, resets = build(name, batch, hidden, steps, device, **options)
        if not engine:
            setattr(cell, "runs_engine", lambda: False)  # noqa: B010 (shadows the method)
        return train_timer(cell, x, resets, clock)

    timers = {name: make(name) for name in names}
    if fallback:
        timers = with_fallback(timers, make)
    if variants:
        timers |= {row: make_variant(row) for row in VARIANTS}
    return summarise(round_robin(timers, repeats), TRAIN_BOUNDS.get)


def measure_rollout(names: Sequence[str], batch: int, hidden: int, steps: int, repeats: int,
                    device: torch.device, clock: Clock = Clock.WALL,
                    fallback: bool = False) -> list[Row]:
    """One T=1 forward call under ``torch.no_grad()`` per step of the train measurement's
    sequence, the state fed back. MemLSTM's cost grows with the episode (it attends over every
    state so far); a row ``memlstm (full)`` shows it from an episode already ``capacity`` steps
    long, every slot in use (reported, not checked)."""
    def make(name: str, warmup: int = 0) -> Timer:
        return rollout_timer(*build(name, batch, hidden, steps, device), clock, warmup)

    timers = {name: make(name) for name in names}
    if fallback:
        timers = with_fallback(timers, make)
    if "memlstm" in names:
        capacity = int(hyperparameters(CELLS["memlstm"])["capacity"].default)
        timers["memlstm (full)"] = make("memlstm", warmup=capacity)
    return summarise(round_robin(timers, repeats),
                     lambda name: None if name == BASELINE or name not in CELLS
                     or name in ROLLOUT_UNCHECKED else ROLLOUT_BOUND)


def print_table(title: str, unit: str, rows: list[Row]) -> bool:
    """Print one markdown table; return whether every bounded cell is within its bound."""
    print(f"\n{title}\n")
    print(f"| cell | ms / {unit} | × {BASELINE} | bound | |")
    print("|---|---:|---:|---:|---|")
    within = True
    for row in rows:
        ok = row.bound is None or row.ratio <= row.bound
        within &= ok
        bound = "" if row.bound is None else f"{row.bound:.1f}×"
        verdict = "" if row.bound is None else ("ok" if ok else "**above**")
        print(f"| {row.cell} | {1e3 * row.seconds:.3f} | {row.ratio:.2f}× | {bound} | "
              f"{verdict} |")
    return within


def load() -> str:
    """The 1, 5 and 15 minute load averages, for the record."""
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--steps", type=int, default=128, help="T of the train measurement")
    parser.add_argument("--repeats", type=int, default=7, help="samples per cell (median)")
    parser.add_argument("--modes", nargs="+", choices=("train", "rollout"),
                        default=["train", "rollout"])
    parser.add_argument("--cells", nargs="+", choices=sorted(CELLS), default=sorted(CELLS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--check", action="store_true",
                        help="exit with status 1 if a cell is above its bound")
    parser.add_argument("--clock", choices=[clock.value for clock in Clock],
                        default=Clock.WALL.value,
                        help="wall: elapsed time; cpu: this process's CPU time (a loaded "
                             "machine)")
    parser.add_argument("--products", choices=("onednn", "torch"), default="onednn",
                        help="train: the cells' large products in oneDNN, as the supervised "
                             "trainer runs them (onednn_products), or torch's functional.linear "
                             "throughout, as our PPO does; the rollout step always torch's")
    parser.add_argument("--fresh-pages", action="store_true",
                        help="leave glibc's allocator as it is (by default it keeps freed "
                             "memory, as the run programs do: rlmem.runs.allocator)")
    parser.add_argument("--fallback", action="store_true",
                        help="also time the Python loops of the cells with compiled ones")
    parser.add_argument("--variants", action="store_true",
                        help="also time the cells with the options of VARIANTS (train only)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    clock = Clock(args.clock)
    names = [BASELINE, *(name for name in args.cells if name != BASELINE)]

    kept = not args.fresh_pages and keep_freed_memory()
    print(f"{cpu_model() if device.type == 'cpu' else device}; torch {torch.__version__}; "
          f"freed memory {'kept' if kept else 'as the allocator chooses'}")
    print(f"hidden {args.hidden}, {device}, {args.threads} thread(s), training products: "
          f"{args.products}, median of "
          f"{args.repeats} round-robin repeats, {clock.value} clock; load average at start: "
          f"{load()}")
    within = True
    for batch in args.batch:
        if "train" in args.modes:
            with onednn_products(args.products == "onednn"):
                rows = measure_train(names, batch, args.hidden, args.steps, args.repeats,
                                     device, clock, args.fallback, args.variants)
            within &= print_table(f"Forward + backward, batch {batch}, T={args.steps}", "step",
                                  rows)
        if "rollout" in args.modes:
            rows = measure_rollout(names, batch, args.hidden, args.steps, args.repeats, device,
                                   clock, args.fallback)
            within &= print_table(f"Rollout step (T=1 forward, no grad, over the T={args.steps} "
                                  f"sequence), batch {batch}", "call", rows)
    print(f"\nload average at end: {load()}")
    if args.check:
        print("check: " + ("every cell within its bound" if within else "FAILED"))
        sys.exit(0 if within else 1)


if __name__ == "__main__":
    main()

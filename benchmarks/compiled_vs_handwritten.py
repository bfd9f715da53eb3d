"""``torch.compile(scan(step))`` against each hand-written backward: is the engine still worth
its code?

    python benchmarks/compiled_vs_handwritten.py                      # T=32, B=16, H=64
    python benchmarks/compiled_vs_handwritten.py --steps 8 --batch 4 --hidden 8 --repeats 2

For each cell whose engine has a hand-written backward (SA-RNN, TARNN, ReLSTM, ReLRNN,
MemLSTM), one training step over a chunk (forward, and backward of the outputs' sum and the
aux losses) two ways, with the same weights, inputs and resets:

- ``handwritten``: the cell as it runs (its engine: the chunk loop without autograd and its
  hand-written backward, compiled C++ loops where they build);
- ``compiled``: ``torch.compile`` of the specification, ``scan(step)``: the cell's
  ``project_input`` and its ``step`` over time under autograd, with the reset applied at every
  step (``torch.where``, no host read of the reset pattern, so that the graph does not depend
  on it). Compiled once per cell before timing (its compile time is reported apart).

The two are timed alternately in one process (handwritten, compiled, handwritten, ...), each
repeat once each, so that a change in the machine's load hits both alike; reported are the
medians, their ratio (compiled / handwritten: above 1 means the hand-written backward is
faster), and the load average (``os.getloadavg``) at start and end. Both results are checked
equal (outputs and parameter gradients, to float32 rounding) before timing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from rlmem.cells import Cell, make_cell
from rlmem.cells.time_loop import reset_state

CELLS: dict[str, dict[str, Any]] = {
    "sarnn": {},
    "tarnn": {},
    "relstm": {"short_term": 5, "relevant": 5},
    "relrnn": {"short_term": 5, "relevant": 5},
    "memlstm": {"capacity": 64},
}
"""The cells whose engine has a hand-written backward, with the options measured."""


def dense_scan(cell: Cell, x: Tensor, state: Any, resets: Tensor) -> tuple[Tensor, Tensor]:
    """``scan(step)`` with the reset applied at every step, and the loss it backpropagates:
    the sum of the outputs plus the cell's aux losses. Equal to :func:`rlmem.cells.scan`."""
    xp = cell.project_input(x)
    outputs: list[Tensor] = []
    traces: dict[str, list[Tensor]] = {}
    for t in range(x.shape[0]):
        state = reset_state(state, resets[t])
        y, state, trace = cell.step(xp[t], state)
        outputs.append(y)
        for key, value in trace.items():
            traces.setdefault(key, []).append(value)
    y = torch.stack(outputs)
    stacked = {key: torch.stack(values) for key, values in traces.items()}
    aux = sum(cell.aux_losses(stacked).values(), torch.zeros((), dtype=y.dtype))
    return y, y.sum() + aux


def handwritten(cell: Cell, x: Tensor, state: Any, resets: Tensor) -> tuple[Tensor, Tensor]:
    """The cell as it runs, through its engine, and the same loss."""
    result = cell.forward_aux(x, state, resets)
    aux = result.aux.total_loss()
    return result.output, result.output.sum() + aux


def train_step(run: Callable[..., tuple[Tensor, Tensor]], cell: Cell, x: Tensor, state: Any,
               resets: Tensor) -> tuple[Tensor, list[Tensor]]:
    """Forward and backward; the outputs and the parameters' gradients."""
    cell.zero_grad(set_to_none=True)
    y, loss = run(cell, x, state, resets)
    loss.backward()
    return y.detach(), [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                        for p in cell.parameters()]


def inputs(cell: Cell, steps: int, batch: int) -> tuple[Tensor, Any, Tensor]:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(steps, batch, cell.input_size, generator=generator)
    resets = torch.rand(steps, batch, generator=generator) < 1 / 8
    resets[0] = True
    return x, cell.initial_state(batch), resets


def measure(name: str, options: dict[str, Any], args: argparse.Namespace) -> dict[str, float]:
    torch.manual_seed(0)
    cell = make_cell(name, input_size=args.hidden, hidden_size=args.hidden, **options)
    cell.anneal(0.5)
    x, state, resets = inputs(cell, args.steps, args.batch)
    compiled_scan = torch.compile(dense_scan, dynamic=False)
    start = time.perf_counter()
    y_compiled, grads_compiled = train_step(compiled_scan, cell, x, state, resets)
    compile_s = time.perf_counter() - start
    y_hand, grads_hand = train_step(handwritten, cell, x, state, resets)
    torch.testing.assert_close(y_compiled, y_hand, rtol=1e-4, atol=1e-5)
    for compiled_grad, hand_grad in zip(grads_compiled, grads_hand, strict=True):
        torch.testing.assert_close(compiled_grad, hand_grad, rtol=1e-3, atol=1e-4)
    times: dict[str, list[float]] = {"handwritten": [], "compiled": []}
    for _ in range(args.repeats):
        for label, run in (("handwritten", handwritten), ("compiled", compiled_scan)):
            start = time.perf_counter()
            train_step(run, cell, x, state, resets)
            times[label].append(time.perf_counter() - start)
    hand, comp = (statistics.median(times[key]) for key in ("handwritten", "compiled"))
    return {"handwritten_ms": 1e3 * hand, "compiled_ms": 1e3 * comp, "ratio": comp / hand,
            "compile_s": compile_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cells", nargs="+", default=list(CELLS), choices=list(CELLS))
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; T={args.steps}, "
          f"B={args.batch}, H={args.hidden}, {args.repeats} repeats (medians)")
    print(f"load average at start: {os.getloadavg()}")
    print("| cell | hand-written ms | torch.compile(scan(step)) ms | compiled / hand-written "
          "| compile s |")
    print("|---|---|---|---|---|")
    for name in args.cells:
        try:
            row = measure(name, CELLS[name], args)
        except Exception as error:  # a cell torch.compile cannot take is a result to report
            print(f"| {name} | failed: {type(error).__name__}: {str(error).splitlines()[0]} "
                  "| | | |")
            continue
        print(f"| {name} | {row['handwritten_ms']:.2f} | {row['compiled_ms']:.2f} | "
              f"{row['ratio']:.2f} | {row['compile_s']:.1f} |", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()

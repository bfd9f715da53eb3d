"""The supervised iterations recorded as a CUDA graph (rlmem.tasks.cuda_graph) compute what the
eager iterations compute; and the host reads they skip (rlmem.cells.host_reads) are the values
a fresh, reset-free chunk has.

The CUDA tests run where torch has CUDA (the lent GPU machine: benchmarks/cuda_check.sh); on
the CPU they are skipped and the rest runs.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from rlmem.cells import CELLS, make_cell
from rlmem.cells.host_reads import fresh_chunks
from rlmem.tasks import SequenceModel, make_task
from rlmem.tasks.cuda_graph import GraphedLoss, compute, graph_refusal

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")
SCHEDULED = {"sarnn"}
"""Cells that follow a training schedule (anneal): a graph would freeze it."""


def model(name: str, device: str, dtype: torch.dtype = torch.float64) -> SequenceModel:
    torch.manual_seed(0)
    task = make_task("copy", alphabet=4, recall=3)
    cell = make_cell(name, input_size=task.input_size, hidden_size=16)
    return SequenceModel(cell, task.output_size, task.categorical).to(device, dtype)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_fresh_chunks_gives_what_the_reads_give(name: str) -> None:
    """From the zero state without resets, the loops told so compute the same, in float64:
    outputs and every gradient."""
    task = make_task("copy", alphabet=4, recall=3)
    batch = task.sample(5, 12, torch.Generator().manual_seed(1))
    results = []
    for fresh in (False, True):
        net = model(name, "cpu")
        with fresh_chunks() if fresh else contextlib.nullcontext():
            computed = compute(net, task, batch, max_norm=1.0)
        results.append((computed.outputs, [p.grad for p in net.parameters()]))
    (out_read, grads_read), (out_told, grads_told) = results
    torch.testing.assert_close(out_told, out_read, rtol=0, atol=0)
    for told, read in zip(grads_told, grads_read, strict=True):
        torch.testing.assert_close(told, read, rtol=0, atol=0)


def test_graphs_are_refused_where_a_recording_would_be_wrong() -> None:
    cuda = torch.device("cuda")
    assert graph_refusal(model("lstm", "cpu"), torch.device("cpu"), True, False) == "not on CUDA"
    assert "seq_len_min" in str(graph_refusal(model("lstm", "cpu"), cuda, False, False))
    assert graph_refusal(model("lstm", "cpu"), cuda, True, True) == "amp=true"
    assert "anneal" in str(graph_refusal(model("sarnn", "cpu"), cuda, True, False))
    assert graph_refusal(model("relstm", "cpu"), cuda, True, False) is None


@CUDA
@pytest.mark.parametrize("name", sorted(set(CELLS) - SCHEDULED))
def test_graphed_iterations_equal_the_eager_ones(name: str) -> None:
    """Five Adam iterations on fresh batches, float64 on CUDA: the graph's replays and the
    eager iterations give the same losses, gradient norms, diagnostics and parameters after
    every step."""
    task = make_task("copy", alphabet=4, recall=3)
    eager, graphed = model(name, "cuda"), model(name, "cuda")
    optimizers = [torch.optim.Adam(net.parameters(), lr=1e-2) for net in (eager, graphed)]
    generator = torch.Generator(device="cuda").manual_seed(0)
    batches = [task.sample(8, 20, generator) for _ in range(5)]
    recorded, first = GraphedLoss.capture(graphed, task, batches[0], max_norm=1.0)
    assert recorded is not None, f"{name}: the capture failed or disagreed"
    for k, batch in enumerate(batches):
        eager.zero_grad(set_to_none=True)
        expected = compute(eager, task, batch, max_norm=1.0)
        got = first if k == 0 else recorded(batch)
        torch.testing.assert_close(got.loss, expected.loss, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(got.grad_norm, expected.grad_norm, rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(got.aux.diagnostics, expected.aux.diagnostics, rtol=1e-12,
                                   atol=1e-14)
        for optimizer in optimizers:
            optimizer.step()
        for p, q in zip(graphed.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p, q, rtol=1e-12, atol=1e-14)

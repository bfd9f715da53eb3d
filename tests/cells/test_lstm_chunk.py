"""The compiled LSTM chunk (``rlmem/cells/_engines/lstm_chunk.py``), which
:func:`~rlmem.cells._engines.fused_rnn.compiled_lstm` switches on: equal in float64 to the
cell's own step under resets, run on exactly the chunks that a reset cuts, off by default, and
per thread."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import torch
from compiled_chunks import counted_chunks
from reference.equivalence import (
    assert_matches_reference,
    assert_matches_without_grad,
    use_loops,
)

from rlmem.cells import make_cell
from rlmem.cells._engines import compiled, fused_rnn, lstm_chunk
from rlmem.cells.lstm import LSTM


def built(**options: Any) -> LSTM:
    torch.manual_seed(0)
    cell = make_cell("lstm", input_size=3, hidden_size=6, **options)
    assert isinstance(cell, LSTM)
    return cell


@pytest.mark.parametrize("options", [{}, {"forget_bias": None, "chrono_t_max": 10}])
def test_the_compiled_chunk_equals_the_step_under_resets(
        options: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # Outputs, final states and the gradients of the inputs, the incoming state and every
    # weight, in chunks of 1, 15, 15 and 17 steps that random resets cut (several per env,
    # one at t = 0 discarding a non-zero incoming state, episodes of length 1).
    use_loops("compiled", monkeypatch)
    fast, step = built(**options), built(**options)
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)  # scan(step)
    ran = counted_chunks(monkeypatch)
    with fused_rnn.compiled_lstm():
        assert_matches_reference(fast, step)
    assert sorted(ran) == [15, 15, 17]  # every chunk that a reset cuts; the 1-step one is not


def test_without_autograd_too(monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("compiled", monkeypatch)
    fast, step = built(), built()
    monkeypatch.setattr(step, "fast_scan", lambda x, state, resets: None)
    ran = counted_chunks(monkeypatch)
    with fused_rnn.compiled_lstm():
        assert_matches_without_grad(fast, step, chunk=8)
    assert ran


def test_only_chunks_that_a_reset_cuts_and_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the blocked products, a chunk that no reset cuts (a reset at its first step does
    not) is one call of torch's kernel, the faster there; outside the context torch's kernel
    runs."""
    monkeypatch.setattr(compiled, "_blocked_available", lambda native: False)
    cell = built()
    ran = counted_chunks(monkeypatch)
    x = torch.randn(6, 4, 3)
    uncut = torch.zeros(6, 4, dtype=torch.bool)
    uncut[0, 1] = True
    cut = uncut.clone()
    cut[3, 2] = True
    cell(x, None, cut)
    with fused_rnn.compiled_lstm():
        cell(x, None, uncut)
        with fused_rnn.compiled_lstm(False):
            cell(x, None, cut)
    assert ran == []
    with fused_rnn.compiled_lstm():
        cell(x, None, cut)
    assert ran == [6]


def test_with_the_blocked_products_small_chunks_under_autograd_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the blocked products (forced here: where the CPU lacks them the chunk's products
    are ATen's), a chunk that no reset cuts runs compiled when it is float32, under autograd
    and at most SMALL_CHUNK steps × items × hidden; acting (no autograd), a larger chunk, or
    float64 keep torch's kernel. A cut chunk runs compiled whatever its size."""
    monkeypatch.setattr(compiled, "_blocked_available", lambda native: True)
    cell = built()
    ran = counted_chunks(monkeypatch)
    uncut = torch.zeros(6, 4, dtype=torch.bool)
    with fused_rnn.compiled_lstm():
        cell(torch.randn(6, 4, 3), None, uncut)  # 6 × 4 × 6 hidden: small
        with torch.no_grad():
            cell(torch.randn(6, 4, 3), None, uncut)
        monkeypatch.setattr(lstm_chunk, "SMALL_CHUNK", 6 * 4 * 6 - 1)
        cell(torch.randn(6, 4, 3), None, uncut)
        cut = uncut.clone()
        cut[2, 0] = True
        cell(torch.randn(6, 4, 3), None, cut)
        cell.double()(torch.randn(5, 4, 3, dtype=torch.float64), None,
                      torch.zeros(5, 4, dtype=torch.bool))
    assert ran == [6, 6]


@pytest.mark.parametrize(("steps", "items", "hidden"), [(7, 5, 6), (16, 16, 64), (3, 9, 40)])
def test_float32_within_rounding_of_float64(steps: int, items: int, hidden: int,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunk in float32 (its products in the blocked loop where the CPU has it: rows in
    groups of 8 and a remainder, columns in blocks of 32 and a masked rest) against the same
    chunk in float64: outputs, final states and every gradient, under resets."""
    use_loops("compiled", monkeypatch)
    torch.manual_seed(1)
    weights = [weight.detach() for weight in torch.nn.LSTM(5, hidden).all_weights[0]]
    x, h0, c0 = (torch.randn(steps, items, 5), torch.randn(items, hidden),
                 torch.randn(items, hidden))
    resets = torch.rand(steps, items) < 0.2
    grads = torch.randn(steps, items, hidden), torch.randn(items, hidden)
    results = []
    for dtype in (torch.float32, torch.float64):
        inputs = [tensor.to(dtype, copy=True).requires_grad_()
                  for tensor in (x, h0, c0, *weights)]
        w_ih, w_hh, b_ih, b_hh = inputs[3:]
        whole = lstm_chunk.lstm_chunk(inputs[0], (w_ih, w_hh, b_ih, b_hh), inputs[1],
                                      inputs[2], resets)
        assert whole is not None
        y, h, c = whole
        torch.autograd.backward([y, h], [grad.to(dtype) for grad in grads])
        results.append([y, h, c, *(tensor.grad for tensor in inputs)])
    for single, double in zip(*results, strict=True):
        assert single is not None and double is not None
        torch.testing.assert_close(single.double(), double, rtol=1e-4, atol=1e-5)


def test_the_switch_is_per_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread started inside the context runs torch's kernel unless it enters the context
    itself (a PPO update's gradient parts do, through the model)."""
    cell = built()
    ran = counted_chunks(monkeypatch)
    x, resets = torch.randn(6, 4, 3), torch.zeros(6, 4, dtype=torch.bool)
    resets[3, 2] = True

    def run(enter: bool) -> None:
        with fused_rnn.compiled_lstm(enter):
            cell(x, None, resets)

    with fused_rnn.compiled_lstm():
        for enter in (False, True):
            thread = threading.Thread(target=run, args=(enter,))
            thread.start()
            thread.join()
    assert ran == [6]


def test_without_the_compiled_loops_the_kernel_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    use_loops("python", monkeypatch)
    cell = built()
    x, resets = torch.randn(6, 4, 3), torch.zeros(6, 4, dtype=torch.bool)
    resets[3, 2] = True
    expected, _ = cell(x, None, resets)
    with fused_rnn.compiled_lstm():
        assert lstm_chunk.lstm_chunk(x, tuple(cell.rnn.all_weights[0]),  # type: ignore[arg-type]
                                     torch.zeros(4, 6), torch.zeros(4, 6), resets) is None
        y, _ = cell(x, None, resets)
    assert torch.equal(y, expected)

"""Which chunks the compiled LSTM chunk (:mod:`rlmem.cells._engines.lstm_chunk`) computed, for
the tests of :func:`rlmem.cells.compiled_lstm` (``tests/cells/test_lstm_chunk.py``,
``tests/agents/test_compiled_lstm.py``)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from rlmem.cells._engines import fused_rnn, lstm_chunk


def counted_chunks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each call of the compiled chunk that returned a result: its number of steps."""
    chunk, steps = lstm_chunk.lstm_chunk, []

    def counting(x: torch.Tensor, *args: Any) -> Any:
        result = chunk(x, *args)
        if result is not None:
            steps.append(x.shape[0])
        return result

    monkeypatch.setattr(fused_rnn, "lstm_chunk", counting)
    return steps

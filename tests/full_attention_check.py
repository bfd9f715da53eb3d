"""Evaluating a MemLSTM run trained with ``capacity=8`` on longer episodes, for the tests that
check that ``rlmem.evaluate`` gives it full attention whatever agent trained it."""

from __future__ import annotations

import warnings
from pathlib import Path

from rlmem.agents.policy_evaluation import EvaluationResult
from rlmem.cells.memlstm import MemoryOverflowWarning
from rlmem.evaluate import evaluate_run
from rlmem.schema.evaluate import EvaluateConfig

LONG_ENV = "MiniGrid-Empty-5x5-v0"
"""An env with DoorKey-5x5's spaces and a 100-step limit: a barely trained policy's episodes
outgrow ``capacity=8``."""


def evaluate_without_overflow(run: Path, episodes: int) -> tuple[EvaluationResult, Path]:
    """Evaluate ``run`` on :data:`LONG_ENV` with the library's defaults, failing on any
    :class:`MemoryOverflowWarning` (a sliding window); return the result and its JSON."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryOverflowWarning)
        _, result, written = evaluate_run(EvaluateConfig(run=str(run), env=LONG_ENV,
                                                         episodes=episodes, num_envs=2,
                                                         progress_bar=False))
    assert written is not None and result.length_mean > 8  # the episodes outgrow capacity=8
    return result, written

"""When the engines' Triton kernels run (:func:`rlmem.cells._engines.gpu.runs`), and that a
chunk they cannot take says so once instead of running silently elsewhere."""

from __future__ import annotations

import logging

import pytest
import torch

from rlmem.cells._engines import gpu


@pytest.fixture(autouse=True)
def fresh_messages() -> None:
    gpu.fallback.cache_clear()


def test_the_cpu_runs_the_kernels_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.zeros(2)
    monkeypatch.delenv(gpu.VARIABLE, raising=False)
    assert not gpu.runs(x, "engine")
    monkeypatch.setenv(gpu.VARIABLE, "0")
    assert not gpu.runs(x, "engine")


def test_interpret_without_the_interpreter_falls_back_and_says_why(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(gpu.VARIABLE, "interpret")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with caplog.at_level(logging.WARNING, logger=gpu.__name__):
        assert not gpu.runs(torch.zeros(2), "screened")
        assert not gpu.runs(torch.zeros(2), "screened")
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1  # once per engine and reason
    assert "screened" in messages[0] and "TRITON_INTERPRET=1" in messages[0]


def test_an_unsupported_dtype_falls_back_with_one_line(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(gpu.VARIABLE, "interpret")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(gpu, "triton_installed", lambda: True)
    with caplog.at_level(logging.WARNING, logger=gpu.__name__):
        assert not gpu.runs(torch.zeros(2, dtype=torch.bfloat16), "tarnn")
        assert gpu.runs(torch.zeros(2, dtype=torch.float64), "tarnn")
    assert [r.getMessage() for r in caplog.records] == [
        "rlmem: tarnn runs its Python loops, not its Triton kernels: the kernels compute in "
        "float32 or float64, not torch.bfloat16"]


def test_without_triton_the_python_loops_run_and_say_so(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(gpu.VARIABLE, "interpret")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(gpu, "triton_installed", lambda: False)
    with caplog.at_level(logging.WARNING, logger=gpu.__name__):
        assert not gpu.runs(torch.zeros(2), "sarnn")
    assert "Triton is not installed" in caplog.records[0].getMessage()


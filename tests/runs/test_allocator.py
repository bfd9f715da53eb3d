"""The run programs keep the memory a process frees (:mod:`rlmem.runs.allocator`): blocks that
glibc mapped afresh at every allocation come from its heap once a run has opened."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from supervised_runs import run_supervised

from rlmem.runs import session

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

PROBE = r"""
import ctypes, ctypes.util, torch
from rlmem.runs.allocator import keep_freed_memory

class Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.mallinfo2.restype = Mallinfo2

def mapped_while_held():  # blocks glibc holds in mappings of their own, with a 64 MB tensor alive
    # 64 MB: above the most glibc's own threshold ever rises to (32 MB), so mapped afresh by
    # default whatever the process freed before
    block = torch.empty(1 << 24)
    return libc.mallinfo2().hblks

print(mapped_while_held() - libc.mallinfo2().hblks, end=" ")
print(keep_freed_memory(), end=" ")
print(mapped_while_held() - libc.mallinfo2().hblks)
"""


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator only")
def test_a_large_block_comes_from_the_heap_once_kept() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["1", "True", "0"], out  # mapped afresh before; from the heap after


def test_elsewhere_it_says_it_did_not_take(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmem.runs import allocator

    try:
        monkeypatch.setattr(allocator.platform, "system", lambda: "Darwin")
        allocator._mallopt.cache_clear()  # looked up again under the patch
        assert allocator.keep_freed_memory() is False
        monkeypatch.undo()
        monkeypatch.setattr(allocator.ctypes.util, "find_library", lambda _: None)
        allocator._mallopt.cache_clear()
        assert allocator.keep_freed_memory() is False
    finally:
        monkeypatch.undo()
        allocator._mallopt.cache_clear()  # the real one for the tests after


def test_a_run_and_its_evaluation_keep_freed_memory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from rlmem import supervised

    calls: list[str] = []

    def spy_in(name: str) -> Callable[[], bool]:
        def spy() -> bool:
            calls.append(name)
            return True
        return spy

    for module in (session, supervised):
        monkeypatch.setattr(module, "keep_freed_memory", spy_in(module.__name__))
    run_supervised(tmp_path / "run", "task=copy", "memory=gru", "seq_len=4", "batch_size=4",
                   "memory.hidden_size=8")
    supervised.evaluate_saved_run(tmp_path / "run", [6], {}, batch_size=4)
    assert calls == ["rlmem.runs.session", "rlmem.supervised"]

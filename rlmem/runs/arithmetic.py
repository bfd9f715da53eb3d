"""Subnormal floats on the CPU: computed with, or flushed to zero (a run's ``flush_denormal``).

A float32 below 1.2e-38 is subnormal. Most x86 processors compute with one many times slower
than with a normal float, and a cell whose state decays towards zero over a long sequence can
fill its activations and gradients with them: TARNN on adding at T = 750 ran 2 to 6 times
slower late in training than with them flushed (``docs/performance.md#subnormal-floats``).
Flushing them (``torch.set_flush_denormal``: subnormal inputs read as zero, subnormal results
written as zero) changes the arithmetic, so it is a setting each run records and resumes with,
never a silent switch; IEEE arithmetic, PyTorch's default, is ``flush_denormal=false``.

The switch is a flag of each CPU thread. PyTorch sets it on the calling thread only; worker
threads of its pool take the caller's flag when the pool is created and keep it. So with
``torch_threads`` above 1 a flag set after the pool exists would apply to part of each
computation. :func:`subnormal_floats` therefore checks, after setting the flag, that every
thread computes as asked, and refuses to go on otherwise. A CUDA device's arithmetic is not
affected either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

FLUSH_KEY = "flush_denormal"
"""The config key of every run program (supervised and RL) that chooses the arithmetic."""

SMALLEST_NORMAL = torch.finfo(torch.float32).tiny
"""1.2e-38: a float32 of smaller magnitude (but zero) is subnormal."""

PROBE_SIZE = 1 << 20
"""Elements of the check's tensor: enough for PyTorch to split an elementwise product over
every thread of its pool."""


class SubnormalFlushError(ValueError):
    """``flush_denormal`` cannot be honoured on this machine or in this process."""


def _flushes_everywhere(probe: torch.Tensor) -> tuple[bool, bool]:
    """Whether a product of subnormals came out as zero on every element, and on any."""
    product = probe * 1.5
    flushed = product == 0
    return bool(flushed.all()), bool(flushed.any())


def flushing_subnormals() -> bool:
    """Whether the calling thread flushes subnormal floats to zero now (one product, computed
    on this thread alone)."""
    return _flushes_everywhere(torch.full((1,), SMALLEST_NORMAL / 4))[0]


@contextmanager
def subnormal_floats(flush: bool) -> Iterator[None]:
    """Compute the block's CPU arithmetic with subnormal floats flushed to zero (``flush``) or
    kept (IEEE, PyTorch's default), and check that every thread does so. The flag is cleared
    when the block ends, so the process computes as PyTorch's default again (on the calling
    thread; see the module's docstring for the pool's).

    Raises:
        SubnormalFlushError: ``flush`` on a CPU without the switch (it has no flush-to-zero
            mode PyTorch can set), or some of PyTorch's threads computing otherwise than asked
            (its pool was created under the other setting, earlier in this process).
    """
    # One subnormal, made before the flag is set (under it, it would be written as zero), and
    # broadcast without computing: the check's product is then the first parallel work, so
    # a pool that does not exist yet is created under the flag, as it should be.
    probe = torch.full((1,), SMALLEST_NORMAL / 4).expand(PROBE_SIZE)
    if not torch.set_flush_denormal(flush) and flush:
        raise SubnormalFlushError(
            "flush_denormal=true: this CPU has no flush-to-zero mode that PyTorch can set "
            "(torch.set_flush_denormal(True) returned False), so the run would compute with "
            "subnormal floats all the same. Nothing was computed; run with "
            "flush_denormal=false.")
    try:
        everywhere, anywhere = _flushes_everywhere(probe)
        if (flush and not everywhere) or (not flush and anywhere):
            raise SubnormalFlushError(
                f"flush_denormal={str(flush).lower()}: some of PyTorch's "
                f"{torch.get_num_threads()} threads compute with subnormal floats "
                f"{'kept' if flush else 'flushed to zero'}, because its thread pool was "
                "created under the other setting earlier in this process; the run would "
                "compute partly one way and partly the other. Nothing was computed; run it "
                "in a fresh process, or with torch_threads=1.")
        yield
    finally:
        torch.set_flush_denormal(False)

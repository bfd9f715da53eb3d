"""A script of ``benchmarks/`` imported as a module, for the tests that call its functions."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType

from locations import REPO


def load_benchmark(name: str) -> Iterator[ModuleType]:
    """``benchmarks/<name>.py`` as the module ``name``, registered in ``sys.modules`` while the
    caller holds it (a dataclass looks its module up while being defined); a fixture's body:
    ``yield from load_benchmark("scaling")``. While it is imported, ``benchmarks/`` leads
    ``sys.path``, as the folder of a script run does, so that it imports the scripts beside it
    (``throughput`` takes its trainer's pieces from ``cuda_check``)."""
    folder = REPO / "benchmarks"
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(folder))
    try:
        try:
            spec.loader.exec_module(module)
        finally:
            sys.path.remove(str(folder))
        yield module
    finally:
        del sys.modules[spec.name]

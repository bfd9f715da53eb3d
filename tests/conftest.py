"""The test suite's root: laid out like the code it tests (``cells/``, ``agents/``, ``envs/``,
``runs/``, ``schema/``, ``tasks/`` for the packages; ``suites/`` and ``bench/`` for the scripts of
``experiments/`` and ``benchmarks/``; the CLIs and top-level modules here).

pytest puts this folder on ``sys.path`` (it holds this conftest and no ``__init__.py``), so every
test imports the helpers beside it as top-level modules: :mod:`cli_runner`, :mod:`gym_envs`,
:mod:`faulty_envs`, :mod:`sb3_envs`, :mod:`locations` and the frozen ``reference`` cells.
"""

import os

if os.environ.get("PYTEST_XDIST_WORKER"):
    # The default run spreads its test files over one worker per core (pytest-xdist, `-n auto`
    # in pyproject.toml): each worker, and every CLI it starts, then computes on one thread, so
    # the workers do not fight over the cores.
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)

if not os.environ.get("TRITON_INTERPRET"):
    import torch

    if not torch.cuda.is_available():
        # Without a GPU the engines' Triton kernels run through Triton's interpreter
        # (tests/cells/test_engines.py). Triton fixes each @jit function as interpreted or
        # compiled when it is defined, its own tl.sum and tl.max included, so the variable must
        # be set before any test imports Triton; set here, it is. A test that compiles the
        # kernels for a GPU does so in a process of its own, without it.
        os.environ["TRITON_INTERPRET"] = "1"

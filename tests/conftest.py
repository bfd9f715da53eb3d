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

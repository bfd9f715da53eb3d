"""The test suite's root: laid out like the code it tests (``cells/``, ``agents/``, ``envs/``,
``runs/``, ``schema/``, ``tasks/`` for the packages; ``suites/`` and ``bench/`` for the scripts of
``experiments/`` and ``benchmarks/``; the CLIs and top-level modules here).

pytest puts this folder on ``sys.path`` (it holds this conftest and no ``__init__.py``), so every
test imports the helpers beside it as top-level modules: :mod:`cli_runner`, :mod:`gym_envs`,
:mod:`faulty_envs`, :mod:`sb3_envs`, :mod:`locations` and the frozen ``reference`` cells.
"""

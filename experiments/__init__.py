"""The reproduction suites: experiment tooling and the run data their results are built from.

Not part of the ``rlmem`` distribution (a wheel holds none of it). Every script runs as a module
from the repository's root, ``python -m experiments.<suite>.<script>``; ``experiments/README.md``
lists them and says which run data the repository keeps.
"""

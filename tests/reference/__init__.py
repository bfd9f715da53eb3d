"""Frozen copies of the cells as they were before they were made fast (rlmem 0.1).

The fast cells in :mod:`rlmem.cells` must compute exactly what these compute, in float64,
outputs and gradients, with resets: ``tests/cells/test_reference_equivalence.py`` holds them to it.
Nothing here is registered or imported by the library; do not edit these files to follow a
change of the library, that is what they guard against.
"""

"""Helpers shared by the cells whose time loop is hand-written (TARNN, SA-RNN, iRNN, ERNN).

Such a loop is equivalent to :func:`rlmem.cells.base.scan`, and a test proves it for every
cell (``tests/test_reference_equivalence.py`` and ``test_fast_path_equals_generic_scan``).
"""

from __future__ import annotations

from torch import Tensor


def reset_steps(resets: Tensor) -> list[bool]:
    """For each step, whether any batch item resets there, so a loop can skip the mask.

    On CPU this read is free. On an accelerator it would stall the host until the device
    catches up, so there every step is masked instead: no host sync, the same result.

    Shapes:
        - resets: ``(T, B)`` bool; returns ``T`` bools
    """
    if resets.device.type == "cpu":
        return resets.any(dim=1).tolist()
    return [True] * resets.shape[0]

"""The per-step reset masks of the engines' Python loops (TARNN, SA-RNN, iRNN, ERNN)."""

from __future__ import annotations

from torch import Tensor


def reset_masks(resets: Tensor) -> list[Tensor | None]:
    """Per step, the ``(B, 1)`` mask of the batch items that reset there, or ``None`` if none.

    A loop re-initialises the state with ``state.masked_fill(mask, 0)`` where the mask is not
    ``None``. On CPU, reading which steps reset is free, and the steps without one skip the
    mask (and the view it costs). On an accelerator that read would stall the host until the
    device catches up, so there every step gets its mask: no host sync, the same result.

    Shapes:
        - resets: ``(T, B)`` bool; returns ``T`` masks of shape ``(B, 1)``, or ``None``
    """
    if resets.device.type != "cpu":
        return list(resets.unsqueeze(-1).unbind(0))
    return [resets[t, :, None] if any_reset else None
            for t, any_reset in enumerate(resets.any(dim=1).tolist())]

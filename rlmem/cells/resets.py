"""The episode-reset rule, written once per direction: the state a reset starts from, and the
gradient that does not cross it.

``resets[t, b]`` starts a new episode at step ``t`` of batch item ``b``: its state is set to the
initial state (all zeros) *before* ``x[t, b]`` is consumed, and no gradient flows from the new
episode back into the old one. :func:`~rlmem.cells.time_loop.reset_state` (the specification's
loop), every engine's Python loop and every hand-written backward apply that rule through the
two functions here; the compiled loops through their one C++ twin (``_engines/csrc/reset.h``).

Both fill through ``masked_fill`` rather than a multiplication by a mask, so that a non-finite
value in a finished episode cannot leak into the next one.
"""

from __future__ import annotations

from torch import Tensor


def reset_where(value: Tensor, where: Tensor, fill: float = 0.0, *,
                in_place: bool = False) -> Tensor:
    """``value`` with the entries of the batch items where ``where`` is true set to what a new
    episode starts from: ``fill``, zero for a state (an engine's layout may start some entries
    elsewhere, e.g. an empty slot's mask at ``-inf``).

    Shapes:
        - value: ``(B, ...)``; where: bool, broadcastable to ``value`` (``(B, 1, ...)``)
    """
    if in_place:
        return value.masked_fill_(where, fill)
    return value.masked_fill(where, fill)


def cut_gradient(grad: Tensor, where: Tensor, *, in_place: bool = False) -> Tensor:
    """A backward loop's gradient of the state before a step, zero for the batch items that
    reset at that step: a new episode reads nothing of the old one, so nothing flows back.

    Shapes:
        - grad: ``(B, ...)``; where: bool, broadcastable to ``grad`` (``(B, 1, ...)``)
    """
    return reset_where(grad, where, in_place=in_place)


def reset_masks(resets: Tensor) -> list[Tensor | None]:
    """Per step, the ``(B, 1)`` mask of the batch items that reset there, or ``None`` if none.

    A loop re-initialises the state with :func:`reset_where` where the mask is not ``None``. On
    CPU, reading which steps reset is free, and the steps without one skip the mask (and the
    view it costs). On an accelerator that read would stall the host until the device catches
    up, so there every step gets its mask: no host sync, the same result.

    Shapes:
        - resets: ``(T, B)`` bool; returns ``T`` masks of shape ``(B, 1)``, or ``None``
    """
    if resets.device.type != "cpu":
        return list(resets.unsqueeze(-1).unbind(0))
    return [resets[t, :, None] if any_reset else None
            for t, any_reset in enumerate(resets.any(dim=1).tolist())]

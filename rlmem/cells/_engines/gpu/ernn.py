r"""ERNN's Triton kernels: iRNN's (:mod:`.irnn`), in ERNN's form.

ERNN's iteration :math:`h \leftarrow (1 - \eta_k) h + \eta_k \phi(M h + d_t)` is the Euler
step of :mod:`.irnn` with :math:`A = M`, α = 1, a zero base and :math:`g_0 = h_{t-1}`:
:math:`g_{k+1} = g_k + \eta_k (\phi(M g_k + d_t) - g_k)`, and :math:`h_t = g_K`. The residual
trace is :math:`\|\phi(M h_t + d_t) - h_t\|`, as the engine's.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from rlmem.cells._engines.gpu import irnn


def uncovered(size: int, phi: Callable[[Tensor], Tensor]) -> str | None:
    """Why the kernels cannot compute a chunk of hidden ``size`` with ``phi``, or ``None``:
    iRNN's limits (:func:`.irnn.uncovered`)."""
    return irnn.uncovered(size, phi)


def scan(drives: Tensor, h0: Tensor, fixed_point_t: Tensor, eta: Tensor, resets: Tensor,
         phi: Callable[[Tensor], Tensor]) -> tuple[Tensor, Tensor]:
    """ERNN over a chunk in one kernel (and its backward in one): y and the residual norms.

    Shapes:
        - drives: ``(T, B, H)``; h0: ``(B, H)``; fixed_point_t: :math:`M^\\top` ``(H, H)``
        - eta: ``(K,)``; resets: ``(T, B)`` bool; phi: one of :func:`.irnn.uncovered`'s φ
        - returns y ``(T, B, H)`` and the residual norms ``(T, B)``
    """
    return irnn.scan(drives, h0, fixed_point_t, eta, eta.new_ones(()), resets, phi,
                     incremental=False)

"""The base recurrences of the attentive cells' engines (LSTM or tanh-RNN), forward into
preallocated buffers and backward by hand; and what their backward loops share.

The math is :meth:`rlmem.cells.lstm_base.LSTMBase.step_doubled` (ReLSTM, MemLSTM) and ReLRNN's
:math:`2\\sigma(z) - 1`, the tanh of its doubled pre-activation.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rlmem.cells.resets import cut_gradient, reset_where

_sigmoid_backward = torch.ops.aten.sigmoid_backward
_tanh_backward = torch.ops.aten.tanh_backward


class BaseRecurrence:
    """One base recurrence (LSTM or tanh-RNN): forward into preallocated buffers, backward.

    ``z`` is the pre-activation block of the base (``4H`` for the LSTM, ``H`` for the RNN), with
    every tanh pre-activation doubled (see :class:`rlmem.cells.attention.Weights`):
    ``g = 2σ(z_g) - 1``. Views of every row are made once: on CPU a view costs as much as a
    small op.
    """

    def __init__(self, lstm: bool, steps: int, hidden: int, c0: Tensor | None, save: bool,
                 buffers: dict[str, Tensor], views: bool = True) -> None:
        self.lstm = lstm
        self.save = save
        self.steps = steps
        self.gates = 4 * hidden if lstm else hidden
        self.minus_one = buffers["minus_one"].fill_(-1.0)
        constants = buffers["constants"]
        constants[0].fill_(2.0)  # fill_, not item assignment: no copy from the host
        constants[1].fill_(0.5)
        self.two, self.half = constants[0], constants[1]
        if not lstm:
            return
        assert c0 is not None
        # act[k] = [i, f, σ(z_g), o]; partner[k] = [g, c_{k-1}, 2i, tanh(c_k)], what each gate
        # is multiplied by in the backward. c_k is written as partner[k + 1]'s c_{k-1}; without
        # saving, two rows take turns.
        self.act, self.partner = buffers["act"], buffers["partner"]
        self.partner[0, :, 1] = c0
        if not views:  # the compiled loops make their own
            return
        act_rows, partner_rows = self.act.unbind(0), self.partner.unbind(0)
        gates = [self.act[:, :, gate].unbind(0) for gate in range(4)]
        parts = [self.partner[:, :, part].unbind(0) for part in range(4)]
        self.c_rows = parts[1]
        # Per step, every view its forward and backward use (without saving, two rows of
        # partner alternate and one row of act is reused).
        rows = range(steps) if save else range(2)
        act_at = [0 if not save else k for k in rows]
        self.forward_views = [
            (act_rows[a], gates[0][a], gates[1][a], gates[2][a], gates[3][a], parts[0][k],
             parts[1][k], parts[2][k], parts[3][k], parts[1][k + 1 if save else 1 - k])
            for k, a in zip(rows, act_at, strict=True)]
        if save:
            self.backward_views = [
                (act_rows[k], gates[1][k], gates[3][k], partner_rows[k][:, :3], parts[3][k])
                for k in range(steps)]

    @staticmethod
    def shapes(lstm: bool, steps: int, batch: int, hidden: int,
               save: bool) -> dict[str, tuple[int, ...]]:
        """The buffers the constructor takes."""
        shapes: dict[str, tuple[int, ...]] = {"minus_one": (batch, hidden), "constants": (2,)}
        if lstm:
            shapes["act"] = (steps if save else 1, batch, 4, hidden)
            shapes["partner"] = (steps + 1 if save else 2, batch, 4, hidden)
        return shapes

    def _row(self, k: int) -> int:
        return k if self.save else k % 2

    def reset(self, k: int, reset: Tensor) -> None:
        """Zero ``c_{k-1}`` of the batch items that reset at step ``k``."""
        if self.lstm:
            reset_where(self.c_rows[self._row(k)], reset.unsqueeze(1), in_place=True)

    def forward(self, k: int, z: Tensor, h: Tensor) -> Tensor:
        """Write ``h_k`` into ``h``, from the base block of ``z`` (``(B, 4, H)`` for the LSTM)."""
        minus_one, two = self.minus_one, self.two
        if not self.lstm:
            torch.sigmoid(z, out=h)
            return torch.add(minus_one, h, alpha=2.0, out=h)
        act, i, f, g_sigmoid, o, g, c_prev, i_twice, tanh_c, c = self.forward_views[
            k if self.save else k % 2]
        torch.sigmoid(z, out=act)
        torch.add(minus_one, g_sigmoid, alpha=2.0, out=g)
        torch.mul(i, two, out=i_twice)
        torch.mul(f, c_prev, out=c).addcmul_(i, g)
        torch.sigmoid(torch.mul(c, two), out=tanh_c)
        torch.add(minus_one, tanh_c, alpha=2.0, out=tanh_c)
        return torch.mul(o, tanh_c, out=h)

    def final_c(self) -> Tensor:
        return self.partner[self._row(self.steps), :, 1].clone()

    def backward(self, k: int, h: Tensor, dh: Tensor, dc: Tensor | None, dz: Tensor,
                 d_act: Tensor, d_act_parts: tuple[Tensor, Tensor],
                 dc_out: Tensor) -> Tensor | None:
        """Write the gradient of the base block of ``z`` into ``dz``; return that of
        ``c_{k-1}``. ``h`` is ``h_k`` (the RNN's backward reads it); ``d_act`` is scratch of
        the shape of an ``act`` row, ``d_act_parts`` its first three gates and its last, and
        ``dc_out`` ``(B, 1, H)`` scratch, not ``dc``'s, for the result."""
        if not self.lstm:
            # z is the doubled pre-activation: d tanh(z / 2) / dz = (1 - h²) / 2.
            _tanh_backward.grad_input(dh, h, grad_input=dz).mul_(self.half)
            return None
        act, f, o, partner_three, tanh_c = self.backward_views[k]
        dc_k = _tanh_backward.grad_input(dh * o, tanh_c, grad_input=dc_out.squeeze(1))
        if dc is not None:
            dc_k.add_(dc)
        torch.mul(partner_three, dc_out, out=d_act_parts[0])
        torch.mul(tanh_c, dh, out=d_act_parts[1])
        _sigmoid_backward.grad_input(d_act, act, grad_input=dz)
        return dc_k.mul_(f)


def state_gradient(dz: Tensor, recurrent: Tensor, g_previous: Tensor | None,
                   reset: Tensor | None) -> Tensor:
    """The gradient of ``s_{k-1}`` in a backward loop: the recurrent weights carry ``dz_k``
    back (nothing crosses a reset, ``reset`` ``(B, 1)``), plus ``y_{k-1}``'s own gradient."""
    if reset is not None:
        ds = cut_gradient(torch.mm(dz, recurrent), reset, in_place=True)
        return ds.add_(g_previous) if g_previous is not None else ds
    if g_previous is not None:
        return torch.addmm(g_previous, dz, recurrent)
    return torch.mm(dz, recurrent)


def previous_states(out: Tensor, s0: Tensor, y: Tensor, resets: Tensor) -> Tensor:
    """``s_{k-1}`` as step ``k`` read it (zero after a reset), for the recurrent weights'
    gradient. Shapes: out, y ``(T, B, H)``; s0 ``(B, H)``; resets ``(T, B)``."""
    out[0] = s0
    out[1:] = y[:-1]
    return reset_where(out, resets.unsqueeze(2), in_place=True)


// LSTM over a whole chunk in one call, the episode resets inside it, forward and backward
// (rlmem.cells._engines.lstm_chunk): the attentive cells' base recurrence (base_recurrence.h)
// alone, where torch's fused kernel needs one call per reset-free segment.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.

// The forward loop. xp (T, B, 4H) is x W_ih'ᵀ + b' for every step at once and recurrent_t
// (H, 4H) is W_hh'ᵀ, both with the g rows doubled (tanh x = 2σ(2x) - 1); h0 (B, H); resets
// (T, B) bool. Fills act (T, B, 4, H), partner (T + 1, B, 4, H) (whose [0][:, 1] holds c0 on
// entry) and y (T, B, H) as Base does when saving; z (B, 4H) is scratch. At a step where an item
// resets, its h and c are zero before the step.
void lstm_chunk_forward(const Tensor& xp, const Tensor& h0, const Tensor& resets,
                        const Tensor& recurrent_t, const Tensor& act, const Tensor& partner,
                        Tensor z, const Tensor& y) {
  const int64_t steps = xp.size(0), batch = h0.size(0), hidden = h0.size(1);
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{true, true, act, partner, Tensor()};
  const Tensor z_gates = z.view({batch, 4, hidden});
  Tensor s = h0;
  for (int64_t k = 0; k < steps; ++k) {
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      s = reset_where(s, reset);
      base.reset(k, reset);
    }
    at::addmm_out(z, xp[k], s, recurrent_t);
    base.forward(k, z_gates, y[k]);
    s = y[k];
  }
}

// The backward loop over what the forward filled: writes dz (T, B, 4H), the gradient of each
// step's doubled pre-activation, and returns those of h0 and c0. g_y (T, B, H), g_h and g_c
// (B, H) may be empty (no gradient); recurrent (4H, H) is W_hh'; dc_buffers (2, B, H) scratch.
// Nothing crosses a reset back into the episode before it.
std::tuple<Tensor, Tensor> lstm_chunk_backward(
    const Tensor& g_y, const Tensor& g_h, const Tensor& g_c, const Tensor& resets,
    const Tensor& recurrent, const Tensor& act, const Tensor& partner, const Tensor& y,
    const Tensor& dz, const Tensor& dc_buffers) {
  const int64_t steps = y.size(0), batch = y.size(1), hidden = y.size(2);
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{true, true, act, partner, Tensor()};
  const bool has_g_y = g_y.numel() > 0;
  Tensor ds = g_h.numel() > 0 ? g_h.clone() : at::zeros({batch, hidden}, y.options());
  if (has_g_y) {
    ds.add_(g_y[steps - 1]);
  }
  Tensor dc = g_c.numel() > 0 ? g_c.contiguous() : Tensor();
  for (int64_t k = steps - 1; k >= 0; --k) {
    Tensor dz_k = dz[k];
    dc = base.backward(k, y[k], ds, dc, dz_k.view({batch, 4, hidden}), dc_buffers[k % 2]);
    ds = at::mm(dz_k, recurrent);
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      reset_where(ds, reset, 0.0, true);
      dc = reset_where(dc, reset);
    }
    if (has_g_y && k > 0) {
      ds.add_(g_y[k - 1]);
    }
  }
  return {ds, dc.clone()};
}

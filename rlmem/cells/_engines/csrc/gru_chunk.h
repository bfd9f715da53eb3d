// A GRU over a whole chunk in one call, the episode resets inside it, forward and backward
// (rlmem.cells._engines.gru_chunk), where torch's GRU on the CPU runs ATen's loop of small
// calls once per reset-free segment.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after lstm_chunk.h (whose product_rows, sigmoid_in_place and zero_reset_rows it
// takes); not a standalone header.
//
// Per step, from s = h_{k-1} (zero where the item resets at k), with xp_k = W_ih x_k + b_ih plus
// b_hr and b_hz in the r and z rows (made for the whole chunk before the loop), and
// hh = W_hh s (one product a step):
//   r = σ(xp_r + hh_r);  z = σ(xp_z + hh_z);  hn = hh_n + b_hn;
//   n = tanh(xp_n + r hn) = 2σ(2 (xp_n + r hn)) - 1;  h = n + z (s - n) = (1 - z) n + z s.
// The backward, with dh = ∂L/∂h_k:
//   dn = (1 - z) dh;  dz = (s - n) dh;  ds = z dh;  da_n = (1 - n²) dn;
//   da_r = r (1 - r) hn da_n;  da_z = z (1 - z) dz;  dhn = r da_n;
//   the input terms' gradient [da_r, da_z, da_n], the hidden terms' [da_r, da_z, dhn], and
//   ∂L/∂s = ds + [da_r, da_z, dhn] W_hh, zero where the item resets at k.

// The step's gates from its terms: act = [xp_r + hh_r, xp_z + hh_z, *] on entry (the products
// added), hh_n the product's n block; writes act = [r, z, n], hn and h (rows of H).
template <typename T>
void gru_step(T* act, const T* hh_n, int64_t hh_stride, const T* xp, const T* b_hn, const T* s,
              T* hn, T* h, int64_t batch, int64_t hidden) {
  const int64_t gates = 3 * hidden;
  for (int64_t b = 0; b < batch; ++b) {
    sigmoid_in_place(act + b * gates, 2 * hidden);  // r, z
  }
  for (int64_t b = 0; b < batch; ++b) {
    T* row = act + b * gates;
    const T* r = row;
    T* n = row + 2 * hidden;
    const T* hh = hh_n + b * hh_stride;
    const T* x_n = xp + b * gates + 2 * hidden;
    T* hn_b = hn + b * hidden;
    #pragma omp simd
    for (int64_t i = 0; i < hidden; ++i) {
      hn_b[i] = hh[i] + b_hn[i];
      n[i] = T(2) * (x_n[i] + r[i] * hn_b[i]);
    }
    sigmoid_in_place(n, hidden);
    const T* z = row + hidden;
    const T* s_b = s + b * hidden;
    T* h_b = h + b * hidden;
    #pragma omp simd
    for (int64_t i = 0; i < hidden; ++i) {
      n[i] = T(2) * n[i] - T(1);
      h_b[i] = n[i] + z[i] * (s_b[i] - n[i]);
    }
  }
}

// The forward loop. xp (T, B, 3H): the input terms with b_ih and b_hr, b_hz; recurrent_t
// (H, 3H) is W_hhᵀ; b_hn (H); h0 (B, H); resets (T, B) bool. Fills act (T, B, 3H) = [r, z, n],
// hn (T, B, H) and y (T, B, H); hh (B, 3H) is scratch. Every tensor contiguous.
template <typename T>
void gru_chunk_forward_rows(const Tensor& xp, const Tensor& h0, const Tensor& resets,
                            const Tensor& recurrent_t, const Tensor& b_hn, const Tensor& act,
                            const Tensor& hn, const Tensor& y) {
  const int64_t steps = xp.size(0), batch = h0.size(0), hidden = h0.size(1);
  const int64_t gates = 3 * hidden, block = batch * gates, state = batch * hidden;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Tensor flags = resets.contiguous();
  std::vector<T> reset_state(state), hh(block);
  T *a = act.data_ptr<T>(), *hn_all = hn.data_ptr<T>(), *out = y.data_ptr<T>();
  const T *x_terms = xp.data_ptr<T>(), *weights = recurrent_t.data_ptr<T>();
  const T* bias_n = b_hn.data_ptr<T>();
  for (int64_t k = 0; k < steps; ++k) {
    const T* s = k == 0 ? h0.data_ptr<T>() : out + (k - 1) * state;
    if (any_reset[k]) {
      std::copy_n(s, state, reset_state.data());
      zero_reset_rows(reset_state.data(), flags.data_ptr<bool>() + k * batch, batch, hidden,
                      hidden);
      s = reset_state.data();
    }
    T* a_k = a + k * block;
    const T* xp_k = x_terms + k * block;
    product_rows(s, hidden, weights, gates, static_cast<const T*>(nullptr), hh.data(), batch,
                 hidden, gates, xp.options());
    for (int64_t b = 0; b < batch; ++b) {
      #pragma omp simd
      for (int64_t i = 0; i < 2 * hidden; ++i) {
        a_k[b * gates + i] = xp_k[b * gates + i] + hh[b * gates + i];
      }
    }
    gru_step(a_k, hh.data() + 2 * hidden, gates, xp_k, bias_n, s, hn_all + k * state,
             out + k * state, batch, hidden);
  }
}

void gru_chunk_forward(const Tensor& xp, const Tensor& h0, const Tensor& resets,
                       const Tensor& recurrent_t, const Tensor& b_hn, const Tensor& act,
                       const Tensor& hn, const Tensor& y) {
  TORCH_CHECK(xp.is_contiguous() && act.is_contiguous() && hn.is_contiguous() &&
                  y.is_contiguous(),
              "gru_chunk_forward: xp, act, hn and y must be contiguous");
  AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "gru_chunk_forward", [&] {
    gru_chunk_forward_rows<scalar_t>(xp, h0.contiguous(), resets, recurrent_t.contiguous(),
                                     b_hn.contiguous(), act, hn, y);
  });
}

// The backward loop over what the forward filled (see the top): s_prev (T, B, H) is each
// step's s (after its reset); writes d_input (T, B, 3H) and d_hidden (T, B, 3H), and returns
// ∂L/∂h0. g_y (T, B, H) and g_h (B, H) may be empty (no gradient); recurrent (3H, H) is W_hh.
template <typename T>
Tensor gru_chunk_backward_rows(const Tensor& g_y, const Tensor& g_h, const Tensor& resets,
                               const Tensor& recurrent, const Tensor& act, const Tensor& hn,
                               const Tensor& s_prev, const Tensor& d_input,
                               const Tensor& d_hidden) {
  const int64_t steps = act.size(0), batch = act.size(1), hidden = hn.size(2);
  const int64_t gates = 3 * hidden, block = batch * gates, state = batch * hidden;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Tensor flags = resets.contiguous();
  Tensor ds_tensor = g_h.numel() > 0 ? g_h.contiguous().clone()
                                     : at::zeros({batch, hidden}, act.options());
  T* ds = ds_tensor.data_ptr<T>();
  const T* upstream = g_y.numel() > 0 ? g_y.data_ptr<T>() : nullptr;
  const T *a = act.data_ptr<T>(), *hn_all = hn.data_ptr<T>(), *s_all = s_prev.data_ptr<T>();
  const T* w = recurrent.data_ptr<T>();
  T *d_in = d_input.data_ptr<T>(), *d_hid = d_hidden.data_ptr<T>();
  for (int64_t k = steps - 1; k >= 0; --k) {
    if (upstream != nullptr) {
      #pragma omp simd
      for (int64_t i = 0; i < state; ++i) {
        ds[i] += upstream[k * state + i];
      }
    }
    for (int64_t b = 0; b < batch; ++b) {
      const T* row = a + k * block + b * gates;
      const T *r = row, *z = row + hidden, *n = row + 2 * hidden;
      const T* hn_b = hn_all + k * state + b * hidden;
      const T* s_b = s_all + k * state + b * hidden;
      T* dh = ds + b * hidden;
      T* di = d_in + k * block + b * gates;
      T* dhid = d_hid + k * block + b * gates;
      #pragma omp simd
      for (int64_t i = 0; i < hidden; ++i) {
        const T g = dh[i];
        const T da_n = (T(1) - z[i]) * g * (T(1) - n[i] * n[i]);
        const T da_z = (s_b[i] - n[i]) * g * z[i] * (T(1) - z[i]);
        const T da_r = da_n * hn_b[i] * r[i] * (T(1) - r[i]);
        di[i] = da_r;
        di[hidden + i] = da_z;
        di[2 * hidden + i] = da_n;
        dhid[i] = da_r;
        dhid[hidden + i] = da_z;
        dhid[2 * hidden + i] = da_n * r[i];
        dh[i] = z[i] * g;
      }
    }
    product_rows(d_hid + k * block, gates, w, hidden, static_cast<const T*>(ds), ds, batch,
                 gates, hidden, act.options());
    if (any_reset[k]) {  // nothing crosses a reset back into the episode before it
      zero_reset_rows(ds, flags.data_ptr<bool>() + k * batch, batch, hidden, hidden);
    }
  }
  return ds_tensor;
}

Tensor gru_chunk_backward(const Tensor& g_y, const Tensor& g_h, const Tensor& resets,
                          const Tensor& recurrent, const Tensor& act, const Tensor& hn,
                          const Tensor& s_prev, const Tensor& d_input, const Tensor& d_hidden) {
  TORCH_CHECK(act.is_contiguous() && hn.is_contiguous() && s_prev.is_contiguous() &&
                  d_input.is_contiguous() && d_hidden.is_contiguous(),
              "gru_chunk_backward: act, hn, s_prev, d_input and d_hidden must be contiguous");
  Tensor dh0;
  AT_DISPATCH_FLOATING_TYPES(act.scalar_type(), "gru_chunk_backward", [&] {
    dh0 = gru_chunk_backward_rows<scalar_t>(g_y.numel() > 0 ? g_y.contiguous() : g_y, g_h,
                                            resets, recurrent.contiguous(), act, hn, s_prev,
                                            d_input, d_hidden);
  });
  return dh0;
}

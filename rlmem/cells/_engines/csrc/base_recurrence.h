// The attentive cells' base recurrence, LSTM or tanh-RNN, forward and backward
// (rlmem.cells._engines.base_recurrence).
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.

// The LSTM step's elementwise part, after act = σ(z) (B, 4, H) = [i, f, σ(z_g), o]: writes
// partner = [g, c_{k-1}, 2i, 2 c_k] (B, 4, H) and c_k into c (rows c_stride apart); the
// caller then applies σ to partner's last block in place.
template <typename T>
inline __attribute__((always_inline)) void lstm_cell(const T* act, T* partner, T* c, int64_t c_stride, int64_t batch,
               int64_t hidden) {
  for (int64_t b = 0; b < batch; ++b) {
    const T* i = act + b * 4 * hidden;
    const T *f = i + hidden, *g_sigmoid = i + 2 * hidden;
    T* g = partner + b * 4 * hidden;
    const T* c_prev = g + hidden;
    T *i_twice = g + 2 * hidden, *c_twice = g + 3 * hidden, *c_b = c + b * c_stride;
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      g[h] = T(2) * g_sigmoid[h] - T(1);
      i_twice[h] = i[h] + i[h];
      c_b[h] = f[h] * c_prev[h] + i[h] * g[h];
      c_twice[h] = c_b[h] + c_b[h];
    }
  }
}

// After σ(2 c_k): partner's last block becomes tanh c_k = 2σ(2 c_k) - 1, and h_k = o tanh c_k
// is written into out (rows out_stride apart).
template <typename T>
inline __attribute__((always_inline)) void lstm_output(const T* act, T* partner, T* out, int64_t out_stride, int64_t batch,
                 int64_t hidden) {
  for (int64_t b = 0; b < batch; ++b) {
    const T* o = act + (b * 4 + 3) * hidden;
    T* tanh_c = partner + (b * 4 + 3) * hidden;
    T* h_b = out + b * out_stride;
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      tanh_c[h] = T(2) * tanh_c[h] - T(1);
      h_b[h] = o[h] * tanh_c[h];
    }
  }
}

// The LSTM step's backward for one batch row, with or without dc (a template argument), in
// loops the compiler vectorises. The gradient of c_k is formed in dc_out and then overwritten
// by that of c_{k-1}: it is stored before dc is added, so that no fused multiply-add rounds
// the two once where the scalar form (the exact reference's arithmetic) rounds them twice.
template <typename T, bool kWithDc>
inline __attribute__((always_inline)) void lstm_row_backward(const T* a, const T* p, const T* dh,
                                                             const T* dc, T* dz, T* dc_out,
                                                             int64_t hidden) {
  const T *i = a, *f = a + hidden, *g_sigmoid = a + 2 * hidden, *o = a + 3 * hidden;
  const T *g = p, *c_prev = p + hidden, *i_twice = p + 2 * hidden, *tanh_c = p + 3 * hidden;
  T *dz_i = dz, *dz_f = dz + hidden, *dz_g = dz + 2 * hidden, *dz_o = dz + 3 * hidden;
  T* d_c = dc_out;
  #pragma omp simd
  for (int64_t h = 0; h < hidden; ++h) {
    d_c[h] = dh[h] * o[h] * (T(1) - tanh_c[h] * tanh_c[h]);
  }
  if constexpr (kWithDc) {
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      d_c[h] += dc[h];
    }
  }
  #pragma omp simd
  for (int64_t h = 0; h < hidden; ++h) {
    const T d_c_h = d_c[h];
    dz_i[h] = g[h] * d_c_h * (T(1) - i[h]) * i[h];
    dz_f[h] = c_prev[h] * d_c_h * (T(1) - f[h]) * f[h];
    dz_g[h] = i_twice[h] * d_c_h * (T(1) - g_sigmoid[h]) * g_sigmoid[h];
    dz_o[h] = tanh_c[h] * dh[h] * (T(1) - o[h]) * o[h];
    dc_out[h] = d_c_h * f[h];
  }
}

// The LSTM step's backward from dh (and dc, of c_k; may be null): the gradient of the
// pre-activation z (rows dz_stride apart, blocks [i, f, g, o], g's doubled) and, into dc_out
// (not dc's memory), that of c_{k-1}.
template <typename T>
inline __attribute__((always_inline)) void lstm_cell_backward(const T* act, const T* partner, const T* dh, const T* dc, T* dz,
                        int64_t dz_stride, T* dc_out, int64_t batch, int64_t hidden) {
  for (int64_t b = 0; b < batch; ++b) {
    const T *a = act + b * 4 * hidden, *p = partner + b * 4 * hidden;
    if (dc != nullptr) {
      lstm_row_backward<T, true>(a, p, dh + b * hidden, dc + b * hidden, dz + b * dz_stride,
                                 dc_out + b * hidden, hidden);
    } else {
      lstm_row_backward<T, false>(a, p, dh + b * hidden, nullptr, dz + b * dz_stride,
                                  dc_out + b * hidden, hidden);
    }
  }
}

// One base recurrence over the buffers of _Base: act (T or 1, B, 4, H) and partner (T + 1 or 2,
// B, 4, H) for the LSTM (act[k] = [i, f, σ(z_g), o], partner[k] = [g, c_{k-1}, 2i, tanh c_k]),
// nothing for the tanh-RNN. Every tanh pre-activation is doubled: tanh(x) = 2σ(2x) - 1.
struct Base {
  bool lstm, save;
  Tensor act, partner, minus_one;

  int64_t row(int64_t k) const { return save ? k : k % 2; }

  void reset(int64_t k, const Tensor& reset) const {  // reset: (B, 1) bool
    if (lstm) {
      reset_where(partner[row(k)].select(1, 1), reset, 0.0, true);
    }
  }

  // Writes h_k into h from the base block of z ((B, 4, H) for the LSTM). The LSTM's σs are
  // kernels.h's, ATen's arithmetic without its per-call dispatch, on rows of act and partner.
  void forward(int64_t k, const Tensor& z, Tensor h) const {
    if (!lstm) {
      at::sigmoid_out(h, z);
      at::add_out(h, minus_one, h, 2.0);
      return;
    }
    const int64_t batch = z.size(0), hidden = z.size(2), gates = 4 * hidden;
    AT_DISPATCH_FLOATING_TYPES(z.scalar_type(), "lstm_forward", [&] {
      using T = scalar_t;
      T* a = act.data_ptr<T>() + (save ? k : 0) * act.stride(0);
      T* p = partner.data_ptr<T>() + row(k) * partner.stride(0);
      T* c = partner.data_ptr<T>() + (save ? k + 1 : 1 - k % 2) * partner.stride(0) + hidden;
      const T* z_rows = z.data_ptr<T>();
      for (int64_t b = 0; b < batch; ++b) {
        std::copy_n(z_rows + b * z.stride(0), gates, a + b * gates);
        sigmoid_in_place(a + b * gates, gates);
      }
      lstm_cell<T>(a, p, c, gates, batch, hidden);
      for (int64_t b = 0; b < batch; ++b) {
        sigmoid_in_place(p + b * gates + 3 * hidden, hidden);  // σ(2 c_k)
      }
      lstm_output<T>(a, p, h.data_ptr<T>(), h.stride(0), batch, hidden);
    });
  }

  // Writes the gradient of the base block of z into dz (the step's row of the pre-activation's
  // gradient: the base's columns first) and returns that of c_{k-1}, dc_out (undefined for the
  // RNN). h is h_k; dc_out is (B, H) scratch, not dc's.
  Tensor backward(int64_t k, const Tensor& h, const Tensor& dh, const Tensor& dc, Tensor dz,
                  Tensor dc_out) const {
    if (!lstm) {
      Tensor dz_base = dz.narrow(1, 0, h.size(1));
      at::tanh_backward_out(dz_base, dh, h);
      dz_base.mul_(0.5);  // z is the doubled pre-activation
      return Tensor();
    }
    const int64_t batch = dh.size(0), hidden = dh.size(1);
    const Tensor dh_rows = dh.is_contiguous() ? dh : dh.contiguous();
    const Tensor dc_rows = !dc.defined() || dc.is_contiguous() ? dc : dc.contiguous();
    AT_DISPATCH_FLOATING_TYPES(dh.scalar_type(), "lstm_cell_backward", [&] {
      using T = scalar_t;
      lstm_cell_backward<T>(act.data_ptr<T>() + k * act.stride(0),
                            partner.data_ptr<T>() + k * partner.stride(0), dh_rows.data_ptr<T>(),
                            dc_rows.defined() ? dc_rows.data_ptr<T>() : nullptr,
                            dz.data_ptr<T>(), dz.stride(0), dc_out.data_ptr<T>(), batch, hidden);
    });
    return dc_out;
  }
};

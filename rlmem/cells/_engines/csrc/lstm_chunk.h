// LSTM over a whole chunk in one call, the episode resets inside it, forward and backward
// (rlmem.cells._engines.lstm_chunk): the attentive cells' base recurrence (base_recurrence.h)
// alone, where torch's fused kernel needs one call per reset-free segment.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.
//
// A step makes no ATen call: its product is blocked_product.h's on raw rows (ATen's where that
// loop does not run), its σ kernels.h's vectorised loop, the rest base_recurrence.h's
// elementwise loops. At a PPO minibatch's 16 chunks of 16 steps each ATen call (a row's
// select, a σ) cost about as much as its arithmetic.

// base_recurrence.h's elementwise steps (always inlined) compiled for AVX-512, for float32
// where the CPU has it: the same arithmetic (elementwise, no sums), twice the width.
RLMEM_WIDE void lstm_cell_avx512(const float* act, float* partner, float* c, int64_t c_stride,
                                 int64_t batch, int64_t hidden) {
  lstm_cell(act, partner, c, c_stride, batch, hidden);
}

RLMEM_WIDE void lstm_output_avx512(const float* act, float* partner, float* out,
                                   int64_t out_stride, int64_t batch, int64_t hidden) {
  lstm_output(act, partner, out, out_stride, batch, hidden);
}

RLMEM_WIDE void lstm_cell_backward_avx512(
    const float* act, const float* partner, const float* dh, const float* dc, float* dz,
    int64_t dz_stride, float* dc_out, int64_t batch, int64_t hidden) {
  lstm_cell_backward(act, partner, dh, dc, dz, dz_stride, dc_out, batch, hidden);
}

// The three above for T, in AVX-512 where they run: each call is wide(args) for float32 when
// `wide`, else narrow(args), the build's own width (the only one for float64).
template <typename T>
struct LSTMSteps {
  bool wide;

  template <typename Wide, typename Narrow, typename... Args>
  void either(Wide wide_step, Narrow narrow_step, Args... args) const {
    if constexpr (std::is_same_v<T, float>) {
      if (wide) {
        return wide_step(args...);
      }
    }
    narrow_step(args...);
  }

  void cell(const T* act, T* partner, T* c, int64_t c_stride, int64_t batch,
            int64_t hidden) const {
    either(lstm_cell_avx512, lstm_cell<T>, act, partner, c, c_stride, batch, hidden);
  }

  void output(const T* act, T* partner, T* out, int64_t out_stride, int64_t batch,
              int64_t hidden) const {
    either(lstm_output_avx512, lstm_output<T>, act, partner, out, out_stride, batch, hidden);
  }

  void backward(const T* act, const T* partner, const T* dh, const T* dc, T* dz,
                int64_t dz_stride, T* dc_out, int64_t batch, int64_t hidden) const {
    either(lstm_cell_backward_avx512, lstm_cell_backward<T>, act, partner, dh, dc, dz,
           dz_stride, dc_out, batch, hidden);
  }
};

// out (M, N) = add + a (M, K) b (K, N) on raw rows: a's rows a_row apart, b's, add's and out's
// columns contiguous (add null: a b). The blocked loop for float32 where it runs, else ATen's
// product over views of the same memory.
template <typename T>
void product_rows(const T* a, int64_t a_row, const T* b, int64_t ldb, const T* add, T* out,
                  int64_t rows, int64_t inner, int64_t columns, const at::TensorOptions& options) {
  if constexpr (std::is_same_v<T, float>) {
    if (blocked_product_available()) {
      blocked_all_rows(a, a_row, 1, b, ldb, add, columns, out, columns, rows, inner, columns);
      return;
    }
  }
  auto view = [&](const T* data, int64_t height, int64_t width, int64_t stride) {
    return at::from_blob(const_cast<T*>(data), {height, width}, {stride, 1}, options);
  };
  Tensor result = view(out, rows, columns, columns);
  if (add != nullptr) {
    at::addmm_out(result, view(add, rows, columns, columns), view(a, rows, inner, a_row),
                  view(b, inner, columns, ldb));
  } else {
    at::mm_out(result, view(a, rows, inner, a_row), view(b, inner, columns, ldb));
  }
}

// The rows of items that reset at step k (flags: that step's B bools) set to zero, each `width`
// numbers at `stride` apart from the next item's.
template <typename T>
void zero_reset_rows(T* rows, const bool* flags, int64_t batch, int64_t width, int64_t stride) {
  for (int64_t b = 0; b < batch; ++b) {
    if (flags[b]) {
      std::fill_n(rows + b * stride, width, T(0));
    }
  }
}

// The forward loop. xp (T, B, 4H) is x W_ih'ᵀ + b' for every step at once and recurrent_t
// (H, 4H) is W_hh'ᵀ, both with the g rows doubled (tanh x = 2σ(2x) - 1); h0 (B, H); resets
// (T, B) bool. Fills act (T, B, 4, H) = [i, f, σ(z_g), o], partner (T + 1, B, 4, H) = [g,
// c_{k-1}, 2i, tanh c_k] (whose [0][:, 1] holds c0 on entry) and y (T, B, H), as Base does when
// saving. At a step where an item resets, its h and c are zero before the step. Every tensor
// but recurrent_t contiguous.
template <typename T>
void lstm_chunk_forward_rows(const Tensor& xp, const Tensor& h0, const Tensor& resets,
                             const Tensor& recurrent_t, const Tensor& act,
                             const Tensor& partner, const Tensor& y) {
  const int64_t steps = xp.size(0), batch = h0.size(0), hidden = h0.size(1);
  const int64_t gates = 4 * hidden, block = batch * gates;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Tensor recurrent = recurrent_t.contiguous();  // read by rows: laid out once
  const Tensor flags = resets.contiguous();
  std::vector<T> reset_state(batch * hidden);
  const LSTMSteps<T> elementwise{blocked_product_available()};
  T *a = act.data_ptr<T>(), *p = partner.data_ptr<T>(), *out = y.data_ptr<T>();
  const T *x_terms = xp.data_ptr<T>(), *weights = recurrent.data_ptr<T>();
  for (int64_t k = 0; k < steps; ++k) {
    const T* s = k == 0 ? h0.data_ptr<T>() : out + (k - 1) * batch * hidden;
    T *a_k = a + k * block, *p_k = p + k * block;
    if (any_reset[k]) {
      const bool* at_k = flags.data_ptr<bool>() + k * batch;
      std::copy_n(s, batch * hidden, reset_state.data());
      zero_reset_rows(reset_state.data(), at_k, batch, hidden, hidden);
      zero_reset_rows(p_k + hidden, at_k, batch, hidden, gates);  // c_{k-1}
      s = reset_state.data();
    }
    product_rows(s, hidden, weights, gates, x_terms + k * block, a_k, batch, hidden, gates,
                 xp.options());  // z_k, made σ(z_k) in place
    sigmoid_in_place(a_k, block);
    elementwise.cell(a_k, p_k, p_k + block + hidden, gates, batch, hidden);
    for (int64_t b = 0; b < batch; ++b) {
      sigmoid_in_place(p_k + b * gates + 3 * hidden, hidden);  // σ(2 c_k)
    }
    elementwise.output(a_k, p_k, out + k * batch * hidden, hidden, batch, hidden);
  }
}

void lstm_chunk_forward(const Tensor& xp, const Tensor& h0, const Tensor& resets,
                        const Tensor& recurrent_t, const Tensor& act, const Tensor& partner,
                        const Tensor& y) {
  AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "lstm_chunk_forward", [&] {
    lstm_chunk_forward_rows<scalar_t>(xp.contiguous(), h0.contiguous(), resets, recurrent_t,
                                      act, partner, y);
  });
}

// The backward loop over what the forward filled: writes dz (T, B, 4H), the gradient of each
// step's doubled pre-activation, and returns those of h0 and c0. g_y (T, B, H), g_h and g_c
// (B, H) may be empty (no gradient); recurrent (4H, H) is W_hh'; dc_buffers (2, B, H) scratch.
// Nothing crosses a reset back into the episode before it.
template <typename T>
std::tuple<Tensor, Tensor> lstm_chunk_backward_rows(
    const Tensor& g_y, const Tensor& g_h, const Tensor& g_c, const Tensor& resets,
    const Tensor& recurrent_in, const Tensor& act, const Tensor& partner, const Tensor& dz,
    const Tensor& dc_buffers, int64_t steps, int64_t batch, int64_t hidden) {
  const int64_t gates = 4 * hidden, block = batch * gates, state = batch * hidden;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Tensor flags = resets.contiguous(), recurrent = recurrent_in.contiguous();
  const LSTMSteps<T> elementwise{blocked_product_available()};
  Tensor ds = g_h.numel() > 0 ? g_h.contiguous().clone() : at::zeros({batch, hidden},
                                                                      act.options());
  Tensor dc = g_c.numel() > 0 ? g_c.contiguous().clone() : at::zeros({batch, hidden},
                                                                      act.options());
  const T* upstream = g_y.numel() > 0 ? g_y.data_ptr<T>() : nullptr;
  T *dh = ds.data_ptr<T>(), *d_c = dc.data_ptr<T>(), *buffers = dc_buffers.data_ptr<T>();
  const T *a = act.data_ptr<T>(), *p = partner.data_ptr<T>(), *w = recurrent.data_ptr<T>();
  T* d_z = dz.data_ptr<T>();
  if (upstream != nullptr) {
    for (int64_t i = 0; i < state; ++i) {
      dh[i] += upstream[(steps - 1) * state + i];
    }
  }
  for (int64_t k = steps - 1; k >= 0; --k) {
    T* dz_k = d_z + k * block;
    T* dc_previous = buffers + (k % 2) * state;
    elementwise.backward(a + k * block, p + k * block, dh, d_c, dz_k, gates, dc_previous, batch,
                         hidden);
    product_rows(dz_k, gates, w, hidden, static_cast<const T*>(nullptr), dh, batch, gates,
                 hidden, act.options());
    std::copy_n(dc_previous, state, d_c);
    if (any_reset[k]) {
      const bool* at_k = flags.data_ptr<bool>() + k * batch;
      zero_reset_rows(dh, at_k, batch, hidden, hidden);
      zero_reset_rows(d_c, at_k, batch, hidden, hidden);
    }
    if (upstream != nullptr && k > 0) {
      for (int64_t i = 0; i < state; ++i) {
        dh[i] += upstream[(k - 1) * state + i];
      }
    }
  }
  return {ds, dc};
}

std::tuple<Tensor, Tensor> lstm_chunk_backward(
    const Tensor& g_y, const Tensor& g_h, const Tensor& g_c, const Tensor& resets,
    const Tensor& recurrent, const Tensor& act, const Tensor& partner, const Tensor& y,
    const Tensor& dz, const Tensor& dc_buffers) {
  std::tuple<Tensor, Tensor> grads;
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "lstm_chunk_backward", [&] {
    grads = lstm_chunk_backward_rows<scalar_t>(
        g_y.numel() > 0 ? g_y.contiguous() : g_y, g_h, g_c, resets, recurrent, act, partner, dz,
        dc_buffers, y.size(0), y.size(1), y.size(2));
  });
  return grads;
}

// The elementwise linear recurrence of FFM and LRU with one map for every step, and its backward
// (rlmem.cells._engines.associative_scan): s_t = a ⊙ s_{t-1} + b_t, real or complex.
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.
//
// A batch item that resets at step t starts from s_{t-1} = 0. With g_t = ∂L/∂s_t from the
// outputs, the total G_t = g_t + ā G_{t+1} (no second term where step t+1 resets), and
//   ∂L/∂b_t = G_t,   ∂L/∂a = Σ_{t, batch} G_t conj(s_{t-1}),   ∂L/∂s_{-1} = ā G_0
// (conjugates as torch's complex autograd takes them; for real numbers they change nothing).
// A step is one pass over the batch's M numbers: at batch 64 torch's addcmul costs about as
// much to call as to run, and the map a, the same at every step, need not be written out over
// the chunk.

template <typename T>
T conjugate(T value) {
  return value;
}

template <typename T>
c10::complex<T> conjugate(c10::complex<T> value) {
  return std::conj(value);
}

template <typename T>
void diagonal_forward_loop(const T* a, const T* b, const T* state, const bool* reset, T* out,
                           int64_t steps, int64_t batch, int64_t size) {
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t n = 0; n < batch; ++n) {
      const int64_t row = (t * batch + n) * size;
      T* s = out + row;
      const T* b_t = b + row;
      if (reset[t * batch + n]) {
        std::copy_n(b_t, size, s);
        continue;
      }
      const T* before = t == 0 ? state + n * size : out + row - batch * size;
      for (int64_t m = 0; m < size; ++m) {
        s[m] = a[m] * before[m] + b_t[m];
      }
    }
  }
}

template <typename T>
void diagonal_backward_loop(const T* a, const T* grad, const T* state, const T* states,
                            const bool* reset, T* grad_a, T* grad_b, T* grad_state,
                            int64_t steps, int64_t batch, int64_t size) {
  std::vector<T> a_bar(size);
  for (int64_t m = 0; m < size; ++m) {
    a_bar[m] = conjugate(a[m]);
  }
  std::fill_n(grad_a, size, T(0));
  for (int64_t t = steps - 1; t >= 0; --t) {
    for (int64_t n = 0; n < batch; ++n) {
      const int64_t row = (t * batch + n) * size;
      T* G = grad_b + row;
      const T* g = grad + row;
      if (t + 1 < steps && !reset[(t + 1) * batch + n]) {
        const T* later = grad_b + row + batch * size;
        for (int64_t m = 0; m < size; ++m) {
          G[m] = g[m] + a_bar[m] * later[m];
        }
      } else {
        std::copy_n(g, size, G);
      }
      if (reset[t * batch + n]) {
        continue;  // s_{t-1} = 0: nothing for a
      }
      const T* before = t == 0 ? state + n * size : states + row - batch * size;
      for (int64_t m = 0; m < size; ++m) {
        grad_a[m] += G[m] * conjugate(before[m]);
      }
    }
  }
  for (int64_t n = 0; n < batch; ++n) {
    T* into = grad_state + n * size;
    if (steps == 0 || reset[n]) {
      std::fill_n(into, size, T(0));
      continue;
    }
    const T* G = grad_b + n * size;
    for (int64_t m = 0; m < size; ++m) {
      into[m] = a_bar[m] * G[m];
    }
  }
}

// a (M), b (T, B, M), state (B, M), resets (T, B) bool: every s_t (T, B, M).
Tensor diagonal_forward(const Tensor& a_in, const Tensor& b_in, const Tensor& state_in,
                        const Tensor& resets_in) {
  const Tensor a = a_in.contiguous(), b = b_in.contiguous(), state = state_in.contiguous();
  const Tensor resets = resets_in.contiguous();
  Tensor out = at::empty_like(b, at::MemoryFormat::Contiguous);
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(b.scalar_type(), "diagonal_forward", [&] {
    diagonal_forward_loop(a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                          state.data_ptr<scalar_t>(), resets.data_ptr<bool>(),
                          out.data_ptr<scalar_t>(), b.size(0), b.size(1), b.size(2));
  });
  return out;
}

// The gradients of a (M), b (T, B, M) and state (B, M) from grad (T, B, M) of the states that
// diagonal_forward returned.
std::tuple<Tensor, Tensor, Tensor> diagonal_backward(const Tensor& grad_in, const Tensor& a_in,
                                                     const Tensor& state_in,
                                                     const Tensor& states_in,
                                                     const Tensor& resets_in) {
  const Tensor grad = grad_in.contiguous(), a = a_in.contiguous();
  const Tensor state = state_in.contiguous(), states = states_in.contiguous();
  const Tensor resets = resets_in.contiguous();
  Tensor grad_a = at::empty_like(a), grad_b = at::empty_like(grad);
  Tensor grad_state = at::empty_like(state);
  AT_DISPATCH_FLOATING_AND_COMPLEX_TYPES(grad.scalar_type(), "diagonal_backward", [&] {
    diagonal_backward_loop(a.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(),
                           state.data_ptr<scalar_t>(), states.data_ptr<scalar_t>(),
                           resets.data_ptr<bool>(), grad_a.data_ptr<scalar_t>(),
                           grad_b.data_ptr<scalar_t>(), grad_state.data_ptr<scalar_t>(),
                           grad.size(0), grad.size(1), grad.size(2));
  });
  return {grad_a, grad_b, grad_state};
}

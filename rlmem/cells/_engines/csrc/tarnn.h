// TARNN's time loop and its backward (rlmem.cells._engines.tarnn).
//
// Part of the one translation unit of loops.cpp, which includes this file inside its anonymous
// namespace after the ATen headers (one unit, as before the split, so that the compiler sees
// and optimises the code as it did); not a standalone header.

// An Euler step after h = φ's kernel of (W u + U z): target e = B u + m h (+ z's upper half in
// the lower half's rows, the coupled A) and z_next = z + η_k β ⊙ (e - z).
template <typename T>
void tarnn_euler(const T* z, const T* h, const T* drive_b, int64_t drive_stride,
                 const T* eta_beta, T* target, T* next, T scale_out, bool coupled,
                 int64_t batch, int64_t size) {
  const int64_t half = size / 2;
  for (int64_t b = 0; b < batch; ++b) {
    const T* z_b = z + b * size;
    const T* h_b = h + b * size;
    const T* u_b = drive_b + b * drive_stride;
    const T* w_b = eta_beta + b * size;
    T* e_b = target + b * size;
    T* n_b = next + b * size;
    #pragma omp simd
    for (int64_t d = 0; d < size; ++d) {
      e_b[d] = u_b[d] + scale_out * h_b[d];
    }
    if (coupled) {
      for (int64_t d = 0; d < half; ++d) {
        e_b[d] += z_b[d + half];
      }
    }
    #pragma omp simd
    for (int64_t d = 0; d < size; ++d) {
      n_b[d] = z_b[d] + w_b[d] * (e_b[d] - z_b[d]);
    }
  }
}

// One Euler step of the backward, before the product with U: q_k = η_k β ⊙ z̄_{k+1},
// ā_k = h'_k ⊙ q_k and carried = z̄_{k+1} - q_k (+ q_k's lower half in the upper half's rows,
// Aᵀ for the coupled A), to which the caller adds ā_k U.
template <typename T>
void tarnn_euler_backward(const T* grad_z, const T* eta_beta, const T* slope, T* q, T* grad_pre,
                          T* carried, bool coupled, int64_t n, int64_t size) {
  const int64_t half = size / 2;
  #pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T q_i = eta_beta[i] * grad_z[i];
    q[i] = q_i;
    grad_pre[i] = q_i * slope[i];
    carried[i] = grad_z[i] - q_i;
  }
  if (coupled) {
    for (int64_t b = 0; b < n / size; ++b) {
      for (int64_t d = 0; d < half; ++d) {
        carried[b * size + d + half] += q[b * size + d];
      }
    }
  }
}

// What sums over the Euler steps at one time step: with F_k = e_k - z_k, β̄ = Σ_k η_k F_k ⊙ z̄_{k+1}
// into the β block of grad_gates (times σ'), Σ_k q_k and Σ_k ā_k into its B u and W u blocks,
// and Σ β ⊙ F_k ⊙ z̄_{k+1} added to grad_eta_terms[k].
template <typename T>
void tarnn_step_sums(const T* targets, const T* euler, const T* grad_z, const T* q,
                     const T* grad_pre, const T* beta, const T* eta, T* grad_gates,
                     T* grad_eta_terms, T* scratch, int64_t steps, int64_t batch, int64_t size) {
  const int64_t n = batch * size;
  T *grad_beta = scratch, *sum_q = scratch + n, *sum_pre = scratch + 2 * n;
  std::fill_n(scratch, 3 * n, T(0));
  for (int64_t k = 0; k < steps; ++k) {
    const T *e_k = targets + k * n, *z_k = euler + k * n, *g_k = grad_z + k * n;
    const T *q_k = q + k * n, *p_k = grad_pre + k * n;
    T* terms = grad_eta_terms + k * n;
    const T eta_k = eta[k];
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T slope = (e_k[i] - z_k[i]) * g_k[i];
      grad_beta[i] += eta_k * slope;
      terms[i] += slope * beta[i];
      sum_q[i] += q_k[i];
      sum_pre[i] += p_k[i];
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    T* row = grad_gates + b * 3 * size;
    const T* beta_b = beta + b * size;
    #pragma omp simd
    for (int64_t d = 0; d < size; ++d) {
      row[d] = grad_beta[b * size + d] * (beta_b[d] - beta_b[d] * beta_b[d]);
    }
    std::copy_n(sum_q + b * size, size, row + size);
    std::copy_n(sum_pre + b * size, size, row + 2 * size);
  }
}

// h'(u) from h(u): σ - σ² for the sigmoid, 1 where positive for relu.
template <typename T>
void inner_derivative(const T* h, T* out, bool sigmoid, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = sigmoid ? h[i] - h[i] * h[i] : (h[i] > T(0) ? T(1) : T(0));
  }
}

// φ's kernel h of FastForm (rlmem.cells._engines.fast_forms): 0 is σ, 1 is relu.
void inner_(Tensor& value, bool sigmoid) {
  if (sigmoid) {
    value.sigmoid_();
  } else {
    value.relu_();
  }
}

// Forward: inputs (T, B, 3D) already in the fast form, s0 (B, D), resets (T, B) bool,
// weight_s_t (D, 3D), weight_u_t (D, D), eta (K,). Writes y, beta (T, B, D) and the Euler
// states z_k, inner values h_k and targets e_k (T, K, B, D) into the buffers given.
void tarnn_forward(const Tensor& inputs, const Tensor& s0, const Tensor& resets,
                   const Tensor& weight_s_t, const Tensor& weight_u_t, const Tensor& eta,
                   bool coupled, int64_t inner_kind, double scale_out, const Tensor& y,
                   const Tensor& beta_all, const Tensor& euler, const Tensor& inner_all,
                   const Tensor& targets, bool onednn) {
  const bool sigmoid = inner_kind == 0;
  const int64_t steps = inputs.size(0), batch = s0.size(0), size = s0.size(1);
  const int64_t euler_steps = eta.size(0);
  const std::vector<bool> any_reset = reset_steps(resets);
  const Tensor eta_column = eta.view({-1, 1, 1});
  Tensor eta_beta = at::empty({euler_steps, batch, size}, s0.options());
  const Product gates_product(weight_s_t, onednn);
  const Product euler_product(weight_u_t, onednn);  // B × D by D × D: below oneDNN's minimum
  Tensor s = s0;
  for (int64_t t = 0; t < steps; ++t) {
    if (any_reset[t]) {
      s = reset_where(s, resets[t].unsqueeze(1));
    }
    const Tensor gates = gates_product(inputs[t], s);
    const Tensor drive_w = gates.narrow(1, 2 * size, size);
    Tensor beta = beta_all[t];
    at::sigmoid_out(beta, gates.narrow(1, 0, size));
    at::mul_out(eta_beta, eta_column, beta);
    const Tensor euler_t = euler[t], inner_t = inner_all[t], targets_t = targets[t];
    euler_t[0].copy_(s);
    for (int64_t k = 0; k < euler_steps; ++k) {
      const Tensor z = euler_t[k];
      Tensor h = inner_t[k];
      euler_product.into(h, drive_w, z);
      inner_(h, sigmoid);
      const Tensor next = k + 1 < euler_steps ? euler_t[k + 1] : y[t];
      AT_DISPATCH_FLOATING_TYPES(s0.scalar_type(), "tarnn_euler", [&] {
        tarnn_euler<scalar_t>(z.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(),
                              gates.data_ptr<scalar_t>() + size, gates.stride(0),
                              eta_beta[k].data_ptr<scalar_t>(), targets_t[k].data_ptr<scalar_t>(),
                              next.data_ptr<scalar_t>(), static_cast<scalar_t>(scale_out),
                              coupled, batch, size);
      });
    }
    s = y[t];
  }
}

// Backward: walks the steps in reverse (see _TARNNScan.backward). weight_s (3D, D) and
// weight_u (D, D) carry m. Returns the gradients of the gates (T, B, 3D, before the gain),
// of s0, of U (before the gain) and Σ_t β ⊙ F_k ⊙ z̄_{k+1} (K, B, D).
std::tuple<Tensor, Tensor, Tensor, Tensor> tarnn_backward(
    const Tensor& grad_y, const Tensor& resets, const Tensor& weight_s, const Tensor& weight_u,
    const Tensor& eta, const Tensor& beta_all, const Tensor& euler, const Tensor& inner_all,
    const Tensor& targets, bool coupled, int64_t inner_kind, bool onednn) {
  const bool sigmoid = inner_kind == 0;
  const int64_t time_steps = grad_y.size(0), batch = grad_y.size(1), size = grad_y.size(2);
  const int64_t steps = eta.size(0), n = batch * size;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Tensor eta_column = eta.view({-1, 1, 1});
  const Tensor eta_values = eta.contiguous();
  const auto options = grad_y.options();
  Tensor grad_z = at::empty({steps, batch, size}, options);  // z̄_{k+1}
  Tensor q = at::empty({steps, batch, size}, options);  // η_k β ⊙ z̄_{k+1}
  Tensor grad_pre = at::empty({steps, batch, size}, options);  // h'_k ⊙ q_k
  Tensor slope_inner = at::empty({steps, batch, size}, options);  // h'_k
  Tensor eta_beta = at::empty({steps, batch, size}, options);
  Tensor grad_gates = at::empty({time_steps, batch, 3 * size}, options);
  Tensor grad_weight_u = at::zeros(weight_u.sizes(), weight_u.options());
  Tensor grad_next = at::zeros({batch, size}, options);
  Tensor grad_eta_terms = at::zeros({steps, batch, size}, options);
  Tensor sums = at::empty({3, batch, size}, options);
  const Tensor grad_pre_rows = grad_pre.view({-1, size}).t();
  const Product gates_product(weight_s, onednn);
  const Product euler_product(weight_u, onednn);
  for (int64_t t = time_steps - 1; t >= 0; --t) {
    const Tensor beta = beta_all[t];
    at::mul_out(eta_beta, eta_column, beta);
    Tensor last = grad_z[steps - 1];
    at::add_out(last, grad_y[t], grad_next);
    const Tensor inner_t = inner_all[t];
    AT_DISPATCH_FLOATING_TYPES(grad_y.scalar_type(), "tarnn_backward_step", [&] {
      using T = scalar_t;
      inner_derivative<T>(inner_t.data_ptr<T>(), slope_inner.data_ptr<T>(), sigmoid,
                          steps * n);
      for (int64_t k = steps - 1; k >= 0; --k) {
        Tensor carried = k ? grad_z[k - 1] : grad_next;
        tarnn_euler_backward<T>(grad_z.data_ptr<T>() + k * n, eta_beta.data_ptr<T>() + k * n,
                                slope_inner.data_ptr<T>() + k * n, q.data_ptr<T>() + k * n,
                                grad_pre.data_ptr<T>() + k * n, carried.data_ptr<T>(), coupled,
                                n, size);
        euler_product.add_to(carried, grad_pre[k]);
      }
      tarnn_step_sums<T>(targets[t].data_ptr<T>(), euler[t].data_ptr<T>(), grad_z.data_ptr<T>(),
                         q.data_ptr<T>(), grad_pre.data_ptr<T>(), beta.data_ptr<T>(),
                         eta_values.data_ptr<T>(), grad_gates[t].data_ptr<T>(),
                         grad_eta_terms.data_ptr<T>(), sums.data_ptr<T>(), steps, batch, size);
    });
    if (onednn) {  // where the products may leave ATen's: the blocked loop on AVX-512
      product_into(grad_weight_u, grad_weight_u, grad_pre_rows, euler[t].view({-1, size}));
    } else {
      grad_weight_u.addmm_(grad_pre_rows, euler[t].view({-1, size}));
    }
    gates_product.add_to(grad_next, grad_gates[t]);
    if (any_reset[t]) {
      reset_where(grad_next, resets[t].unsqueeze(1), 0.0, true);
    }
  }
  return {grad_gates, grad_next, grad_weight_u, grad_eta_terms};
}

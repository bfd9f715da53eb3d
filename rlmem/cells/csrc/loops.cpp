// The time loops of rlmem's research cells, compiled: the same ATen calls as their Python
// loops (rlmem/cells/tarnn.py, rlmem/cells/attention_scan.py), without an interpreter between
// them. At batch 16 a small op costs about as much to call from Python as to run; here it is
// called from C++. Loaded by rlmem/cells/extension.py, which falls back to the Python loops when
// this file cannot be built. CPU only: the caller checks the device.
#define TORCH_ASSERT_ONLY_METHOD_OPERATORS
#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/_softmax.h>
#include <ATen/ops/_softmax_backward_data.h>
#include <ATen/ops/add.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/baddbmm.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/lerp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/min.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <ATen/ops/arange.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

namespace {

using at::Tensor;

// σ in place over a row of n numbers, vectorised like ATen's sigmoid (at::vec; AVX2 where the
// build has it, see extension.py), and the dot product of the result with score.
template <typename T>
T sigmoid_dot(T* row, const T* score, int64_t n) {
  using V = at::vec::Vectorized<T>;
  const V one(T(1));
  V acc(T(0));
  int64_t i = 0;
  for (; i + V::size() <= n; i += V::size()) {
    const V value = one / (one + V::loadu(row + i).neg().exp());
    value.store(row + i);
    acc = acc + value * V::loadu(score + i);
  }
  T parts[V::size()];
  acc.store(parts);
  T total = 0;
  for (int64_t j = 0; j < V::size(); ++j) {
    total += parts[j];
  }
  for (; i < n; ++i) {
    row[i] = T(1) / (T(1) + std::exp(-row[i]));
    total += row[i] * score[i];
  }
  return total;
}

// The softmax of the n logits in w, in place, and out = own + Σ_i w_i row(i), each of the
// H numbers that row(i) points to: the read of every attention.
template <typename T, typename Row>
void softmax_read(T* w, int64_t n, const T* own, T* out, int64_t hidden, Row row) {
  T largest = -std::numeric_limits<T>::infinity();
  for (int64_t i = 0; i < n; ++i) {
    largest = std::max(largest, w[i]);
  }
  T total = 0;
  for (int64_t i = 0; i < n; ++i) {
    w[i] = std::exp(w[i] - largest);
    total += w[i];
  }
  std::copy_n(own, hidden, out);
  for (int64_t i = 0; i < n; ++i) {
    w[i] /= total;
    const T weight = w[i];
    const T* m = row(i);
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      out[h] += weight * m[h];
    }
  }
}

// Which steps reset some batch item: resets is a (T, B) bool CPU tensor.
std::vector<bool> reset_steps(const Tensor& resets) {
  const Tensor flags = resets.contiguous();
  const bool* data = flags.data_ptr<bool>();
  const int64_t steps = flags.size(0), batch = flags.size(1);
  std::vector<bool> any(steps, false);
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      if (data[t * batch + b]) {
        any[t] = true;
        break;
      }
    }
  }
  return any;
}

// --- TARNN (rlmem.cells.tarnn._TARNNScan) ------------------------------------------------------

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

// φ's kernel h of rlmem.cells.activations.FastForm: 0 is σ, 1 is relu.
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
                   const Tensor& targets) {
  const bool sigmoid = inner_kind == 0;
  const int64_t steps = inputs.size(0), batch = s0.size(0), size = s0.size(1);
  const int64_t euler_steps = eta.size(0);
  const std::vector<bool> any_reset = reset_steps(resets);
  const Tensor eta_column = eta.view({-1, 1, 1});
  Tensor eta_beta = at::empty({euler_steps, batch, size}, s0.options());
  Tensor s = s0;
  for (int64_t t = 0; t < steps; ++t) {
    if (any_reset[t]) {
      s = s.masked_fill(resets[t].unsqueeze(1), 0.0);
    }
    const Tensor gates = at::addmm(inputs[t], s, weight_s_t);
    const Tensor drive_w = gates.narrow(1, 2 * size, size);
    Tensor beta = beta_all[t];
    at::sigmoid_out(beta, gates.narrow(1, 0, size));
    at::mul_out(eta_beta, eta_column, beta);
    const Tensor euler_t = euler[t], inner_t = inner_all[t], targets_t = targets[t];
    euler_t[0].copy_(s);
    for (int64_t k = 0; k < euler_steps; ++k) {
      const Tensor z = euler_t[k];
      Tensor h = inner_t[k];
      at::addmm_out(h, drive_w, z, weight_u_t);
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
    const Tensor& targets, bool coupled, int64_t inner_kind) {
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
        carried.addmm_(grad_pre[k], weight_u);
      }
      tarnn_step_sums<T>(targets[t].data_ptr<T>(), euler[t].data_ptr<T>(), grad_z.data_ptr<T>(),
                         q.data_ptr<T>(), grad_pre.data_ptr<T>(), beta.data_ptr<T>(),
                         eta_values.data_ptr<T>(), grad_gates[t].data_ptr<T>(),
                         grad_eta_terms.data_ptr<T>(), sums.data_ptr<T>(), steps, batch, size);
    });
    grad_weight_u.addmm_(grad_pre_rows, euler[t].view({-1, size}));
    grad_next.addmm_(grad_gates[t], weight_s);
    if (any_reset[t]) {
      grad_next.masked_fill_(resets[t].unsqueeze(1), 0.0);
    }
  }
  return {grad_gates, grad_next, grad_weight_u, grad_eta_terms};
}

// The LSTM step's elementwise part, after act = σ(z) (B, 4, H) = [i, f, σ(z_g), o]: writes
// partner = [g, c_{k-1}, 2i, 2 c_k] (B, 4, H) and c_k into c (rows c_stride apart); the
// caller then applies σ to partner's last block in place.
template <typename T>
void lstm_cell(const T* act, T* partner, T* c, int64_t c_stride, int64_t batch,
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
void lstm_output(const T* act, T* partner, T* out, int64_t out_stride, int64_t batch,
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

// The LSTM step's backward from dh (and dc, of c_k; may be null): the gradient of the
// pre-activation z (rows dz_stride apart, blocks [i, f, g, o], g's doubled) and, into dc_out,
// that of c_{k-1}.
template <typename T>
void lstm_cell_backward(const T* act, const T* partner, const T* dh, const T* dc, T* dz,
                        int64_t dz_stride, T* dc_out, int64_t batch, int64_t hidden) {
  for (int64_t b = 0; b < batch; ++b) {
    const T* a = act + b * 4 * hidden;
    const T* p = partner + b * 4 * hidden;
    const T* dh_b = dh + b * hidden;
    T* dz_b = dz + b * dz_stride;
    T* dc_b = dc_out + b * hidden;
    for (int64_t h = 0; h < hidden; ++h) {
      const T tanh_c = p[3 * hidden + h], o = a[3 * hidden + h];
      T d_c = dh_b[h] * o * (T(1) - tanh_c * tanh_c);
      if (dc != nullptr) {
        d_c += dc[b * hidden + h];
      }
      const T d_gates[4] = {p[h] * d_c, p[hidden + h] * d_c, p[2 * hidden + h] * d_c,
                            tanh_c * dh_b[h]};
      for (int64_t gate = 0; gate < 4; ++gate) {
        const T y = a[gate * hidden + h];
        dz_b[gate * hidden + h] = d_gates[gate] * (T(1) - y) * y;
      }
      dc_b[h] = d_c * a[hidden + h];
    }
  }
}

// --- the attentive cells' base recurrence (rlmem.cells.attention_scan._Base) -------------------

// One base recurrence over the buffers of _Base: act (T or 1, B, 4, H) and partner (T + 1 or 2,
// B, 4, H) for the LSTM (act[k] = [i, f, σ(z_g), o], partner[k] = [g, c_{k-1}, 2i, tanh c_k]),
// nothing for the tanh-RNN. Every tanh pre-activation is doubled: tanh(x) = 2σ(2x) - 1.
struct Base {
  bool lstm, save;
  Tensor act, partner, minus_one;

  int64_t row(int64_t k) const { return save ? k : k % 2; }

  void reset(int64_t k, const Tensor& reset) const {  // reset: (B, 1) bool
    if (lstm) {
      partner[row(k)].select(1, 1).masked_fill_(reset, 0.0);
    }
  }

  // Writes h_k into h from the base block of z ((B, 4, H) for the LSTM).
  void forward(int64_t k, const Tensor& z, Tensor h) const {
    if (!lstm) {
      at::sigmoid_out(h, z);
      at::add_out(h, minus_one, h, 2.0);
      return;
    }
    Tensor a = act[save ? k : 0];
    const Tensor p = partner[row(k)];
    at::sigmoid_out(a, z);
    Tensor c = partner[save ? k + 1 : 1 - k % 2].select(1, 1);
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "lstm_cell", [&] {
      lstm_cell<scalar_t>(a.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(),
                          c.stride(0), a.size(0), a.size(2));
    });
    p.select(1, 3).sigmoid_();
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "lstm_output", [&] {
      lstm_output<scalar_t>(a.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(),
                            h.stride(0), a.size(0), a.size(2));
    });
  }

  // Writes the gradient of the base block of z into dz and returns that of c_{k-1} (undefined
  // for the RNN). h is h_k; dc_out is (B, H) scratch, not dc's.
  Tensor backward(int64_t k, const Tensor& h, const Tensor& dh, const Tensor& dc, Tensor dz,
                  Tensor dc_out) const {
    if (!lstm) {
      at::tanh_backward_out(dz, dh, h);
      dz.mul_(0.5);  // z is the doubled pre-activation
      return Tensor();
    }
    const Tensor a = act[k], p = partner[k];
    const Tensor dh_rows = dh.contiguous(), dc_rows = dc.defined() ? dc.contiguous() : dc;
    AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "lstm_cell_backward", [&] {
      lstm_cell_backward<scalar_t>(
          a.data_ptr<scalar_t>(), p.data_ptr<scalar_t>(), dh_rows.data_ptr<scalar_t>(),
          dc_rows.defined() ? dc_rows.data_ptr<scalar_t>() : nullptr, dz.data_ptr<scalar_t>(),
          dz.stride(0), dc_out.data_ptr<scalar_t>(), a.size(0), a.size(2));
    });
    return dc_out;
  }
};

// --- relevancy screening (rlmem.cells.attention_scan._screened_forward / _backward) -----------
//
// The slots are rows of slot_data (B, ν+ρ+1, width): [m_i, 2 U_a m_i, score, mask, rank, episode
// step, padding], S as a ring (its oldest state in slot k mod ν at step k), then R, then a scratch
// slot that takes the write of a candidate that does not enter R.

// The screening C(i): the state leaving S from slot p enters R at the lowest-ranked slot (a free
// one ranks -inf, the first lowest wins) if it ranks above it, else goes to the scratch slot.
// Records the target row, what it held (evicted, if not null) and moves the candidate there.
template <typename T>
void screen(T* slots_data, int64_t* targets, T* evicted, int64_t p, int64_t nu, int64_t slots,
            int64_t width, int64_t wide, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t first_row = b * (slots + 1);
    T* rows = slots_data + first_row * width;
    int64_t lowest = nu;
    for (int64_t i = nu + 1; i < slots; ++i) {
      if (rows[i * width + wide + 2] < rows[lowest * width + wide + 2]) {
        lowest = i;
      }
    }
    const int64_t target = rows[p * width + wide + 2] > rows[lowest * width + wide + 2]
                               ? lowest : slots;
    targets[b] = first_row + target;
    if (evicted != nullptr) {
      std::copy_n(rows + target * width, width, evicted + b * width);
    }
    std::copy_n(rows + p * width, width, rows + target * width);
  }
}

// The new state's meta data into slot p, e_i = σ(2 U_a m_i + 2 W_a s + 2 b_a) for every slot,
// and the logits e_i · 2 v_a plus the slots' masks into attention (B, ν+ρ).
template <typename T>
void screened_pre(T* slots_data, const T* query, int64_t query_stride, const T* entering, T* e,
                  const T* score, T* attention, int64_t p, int64_t slots, int64_t width,
                  int64_t hidden, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    T* rows = slots_data + b * (slots + 1) * width;
    std::copy_n(entering + b * 4, 4, rows + p * width + 2 * hidden);
    const T* q = query + b * query_stride;
    for (int64_t i = 0; i < slots; ++i) {
      const T* key = rows + i * width + hidden;
      T* out = e + (b * slots + i) * hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        out[h] = key[h] + q[h];
      }
      attention[b * slots + i] = sigmoid_dot(out, score, hidden) + rows[i * width + 2 * hidden + 1];
    }
  }
}

// The softmax of the logits in attention over the slots, s = h + Σ_i w_i m_i, the attention
// added to the scores (and ranks) of S, and the slots' meta data recorded for the traces.
// Normalised screening adds each weight times |M_t| / ν, |M_t| the slots holding a state.
template <typename T>
void screened_attend(T* slots_data, T* attention, T* history, T* y, int64_t p, int64_t nu,
                     int64_t slots, int64_t width, int64_t hidden, int64_t batch,
                     bool normalised) {
  const int64_t wide = 2 * hidden;
  for (int64_t b = 0; b < batch; ++b) {
    T* rows = slots_data + b * (slots + 1) * width;
    T* w = attention + b * slots;
    softmax_read(w, slots, rows + p * width, y + b * hidden, hidden,
                 [&](int64_t i) { return rows + i * width; });
    T share = T(1);
    if (normalised) {
      int64_t held = 0;
      for (int64_t i = 0; i < slots; ++i) {
        held += rows[i * width + wide + 1] == T(0);
      }
      share = static_cast<T>(held) / static_cast<T>(nu);
    }
    for (int64_t i = 0; i < nu; ++i) {
      const T received = normalised ? w[i] * share : w[i];
      rows[i * width + wide] += received;
      rows[i * width + wide + 2] += received;
    }
    for (int64_t i = 0; i < slots; ++i) {
      std::copy_n(rows + i * width + wide, 4, history + (b * slots + i) * 4);
    }
  }
}

// The forward loop over the buffers _screened_forward prepared. Returns the slots as they were
// before each reset (one clone per step that resets some item, in order), when saving.
std::vector<Tensor> screened_forward(
    const Tensor& xp, const Tensor& s0, const Tensor& resets, const Tensor& recurrent_t,
    const Tensor& key_t, const Tensor& score_vector, const Tensor& slot_data,
    const Tensor& z_in, const Tensor& z, const Tensor& entering, const Tensor& e,
    const Tensor& attention, const Tensor& history, const Tensor& targets,
    const Tensor& evicted, const Tensor& y, const Tensor& act, const Tensor& partner,
    const Tensor& minus_one, int64_t nu, bool lstm, bool normalised, double uniform_share,
    bool save) {
  const int64_t steps = xp.size(0), batch = s0.size(0), hidden = s0.size(1);
  const int64_t slots = attention.size(2), gates = lstm ? 4 * hidden : hidden;
  const int64_t wide = 2 * hidden, width = slot_data.size(2);
  const double minus_inf = -std::numeric_limits<double>::infinity();
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{lstm, save, act, partner, minus_one};
  const Tensor mask = slot_data.select(2, wide + 1), rank = slot_data.select(2, wide + 2);
  Tensor z_in_base = z_in.narrow(1, 0, gates);
  const Tensor z_base = lstm ? z.narrow(1, 0, gates).view({batch, 4, hidden})
                             : z.narrow(1, 0, gates);
  std::vector<Tensor> before_reset;
  Tensor s = s0;
  Tensor z_out = z;
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t p = k % nu;
    const Tensor slot_p = slot_data.select(1, p);
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      s = s.masked_fill(reset, 0.0);
      base.reset(k, reset);
      if (save) {
        before_reset.push_back(slot_data.clone());
      }
      slot_data.masked_fill_(reset.unsqueeze(2), 0.0);
      mask.masked_fill_(reset, minus_inf);
      rank.masked_fill_(reset, minus_inf);
      if (normalised) {  // a free slot of R ranks at the uniform share
        rank.narrow(1, nu, slots - nu).masked_fill_(reset, uniform_share);
      }
    }
    z_in_base.copy_(xp[k]);
    at::addmm_out(z_out, z_in, s, recurrent_t);
    // h_{t-ν} leaves S from slot p and is screened into R (see relevancy.screen).
    AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "screen", [&] {
      screen<scalar_t>(slot_data.data_ptr<scalar_t>(), targets[k].data_ptr<int64_t>(),
                       save ? evicted[k].data_ptr<scalar_t>() : nullptr, p, nu, slots, width,
                       wide, batch);
    });
    // h_t enters S in the slot just vacated.
    base.forward(k, z_base, slot_p.narrow(1, 0, hidden));
    Tensor keys_p = slot_p.narrow(1, hidden, hidden);
    at::mm_out(keys_p, slot_p.narrow(1, 0, hidden), key_t);
    Tensor e_k = e[save ? k : 0];
    AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "screened_attend", [&] {
      using T = scalar_t;
      screened_pre<T>(slot_data.data_ptr<T>(), z.data_ptr<T>() + gates, z.stride(0),
                      entering[k].data_ptr<T>(), e_k.data_ptr<T>(), score_vector.data_ptr<T>(),
                      attention[k].data_ptr<T>(), p, slots, width, hidden, batch);
      screened_attend<T>(slot_data.data_ptr<T>(), attention[k].data_ptr<T>(),
                         history[k].data_ptr<T>(), y[k].data_ptr<T>(), p, nu, slots, width,
                         hidden, batch, normalised);
    });
    s = y[k];
  }
  return before_reset;
}

// The attention's backward at one step, over the slots as step k saw them: d_weights_i = ds·m_i,
// the softmax's backward (into d_logits), and the gradients of what the slots hold
// (grad rows [m_i, 2 U_a m_i, score]: d m_i += w_i ds, d(2 U_a m_i) += 2 v_a ⊙ dp_i) and of the
// query (Σ_i 2 v_a ⊙ dp_i), with dp_i = dlogit_i σ'(e_i).
template <typename T>
void screened_attend_backward(const T* ds, const T* weights, const T* e, const T* score,
                              const T* slots_data, T* grad, T* d_logits, T* d_query,
                              int64_t d_query_stride, int64_t slots, int64_t width,
                              int64_t hidden, int64_t batch) {
  const int64_t grad_width = 2 * hidden + 1;
  for (int64_t b = 0; b < batch; ++b) {
    const T* ds_b = ds + b * hidden;
    const T* w_b = weights + b * slots;
    const T* rows = slots_data + b * (slots + 1) * width;
    T* grad_rows = grad + b * (slots + 1) * grad_width;
    T* dl = d_logits + b * slots;
    T weighted = 0;
    for (int64_t i = 0; i < slots; ++i) {
      const T* m = rows + i * width;
      T* dm = grad_rows + i * grad_width;
      const T weight = w_b[i];
      T dot = 0;
      #pragma omp simd reduction(+ : dot)
      for (int64_t h = 0; h < hidden; ++h) {
        dot += ds_b[h] * m[h];
        dm[h] += weight * ds_b[h];
      }
      dl[i] = dot;
      weighted += dot * weight;
    }
    T* dq = d_query + b * d_query_stride;
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] = 0;
    }
    for (int64_t i = 0; i < slots; ++i) {
      dl[i] = w_b[i] * (dl[i] - weighted);
      const T d_logit = dl[i];
      const T* e_i = e + (b * slots + i) * hidden;
      T* dk = grad_rows + i * grad_width + hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        const T dp = d_logit * (T(1) - e_i[h]) * e_i[h];
        dq[h] += dp;
        dk[h] += dp * score[h];
      }
    }
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] *= score[h];
    }
  }
}

// Undoes the writes of step k, to the gradients and to the slots: h_k (copied into h) leaves
// slot p with its gradient, the candidate comes back to p from its target with the gradient it
// gathered there, and the target gets back what it held (evicted) and no gradient.
template <typename T>
void screened_undo(T* slots_data, T* grad, const int64_t* targets, const T* evicted, T* h,
                   int64_t p, int64_t slots, int64_t width, int64_t hidden, int64_t batch) {
  const int64_t grad_width = 2 * hidden + 1;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t row_p = b * (slots + 1) + p, target = targets[b];
    std::copy_n(grad + target * grad_width, grad_width, grad + row_p * grad_width);
    std::fill_n(grad + target * grad_width, grad_width, T(0));
    std::copy_n(slots_data + row_p * width, hidden, h + b * hidden);
    std::copy_n(slots_data + target * width, width, slots_data + row_p * width);
    std::copy_n(evicted + b * width, width, slots_data + target * width);
  }
}

// The backward loop of _screened_backward. grad (B, ν+ρ+1, 2H+1) holds the gradient of what
// each slot holds; slot_data the forward's final slots, restored step by step. Returns the
// gradients of s0 and c0 (undefined without the LSTM or without a gradient).
std::tuple<Tensor, Tensor> screened_backward(
    const Tensor& g_y_or_empty, const Tensor& g_c_or_empty, const Tensor& resets,
    const Tensor& recurrent, const Tensor& key, const Tensor& score_vector,
    const Tensor& attention, const Tensor& e, const Tensor& targets, const Tensor& evicted,
    const std::vector<Tensor>& before_reset, const Tensor& slot_data, const Tensor& grad,
    const Tensor& dz, const Tensor& d_logits, const Tensor& d_keys_h, const Tensor& h_buffer,
    const Tensor& dc_buffers, const Tensor& act, const Tensor& partner, int64_t nu,
    bool lstm) {
  const int64_t steps = attention.size(0), batch = attention.size(1), slots = attention.size(2);
  const int64_t hidden = key.size(0), gates = lstm ? 4 * hidden : hidden;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{lstm, true, act, partner, Tensor()};
  const bool has_g_y = g_y_or_empty.numel() > 0;
  const int64_t width = slot_data.size(2);
  Tensor ds = has_g_y ? g_y_or_empty[steps - 1].contiguous()
                      : at::zeros({batch, hidden}, key.options());
  Tensor dc = g_c_or_empty.numel() > 0 ? g_c_or_empty : Tensor();
  int64_t reset_index = static_cast<int64_t>(before_reset.size());
  for (int64_t k = steps - 1; k >= 0; --k) {
    const int64_t p = k % nu;
    Tensor dz_k = dz[k];
    AT_DISPATCH_FLOATING_TYPES(key.scalar_type(), "screened_attend_backward", [&] {
      screened_attend_backward<scalar_t>(
          ds.data_ptr<scalar_t>(), attention[k].data_ptr<scalar_t>(), e[k].data_ptr<scalar_t>(),
          score_vector.data_ptr<scalar_t>(), slot_data.data_ptr<scalar_t>(),
          grad.data_ptr<scalar_t>(), d_logits[k].data_ptr<scalar_t>(),
          dz_k.data_ptr<scalar_t>() + gates, dz_k.stride(0), slots, width, hidden, batch);
    });
    // Undo the writes of step k: h_k leaves slot p with its gradient; the candidate comes back
    // to p with the gradient it gathered at its target, which held nothing before.
    const Tensor grad_p = grad.select(1, p);
    Tensor d_keys_k = d_keys_h[k];
    d_keys_k.copy_(grad_p.narrow(1, hidden, hidden));
    const Tensor dh = at::addmm(ds.add(grad_p.narrow(1, 0, hidden)), d_keys_k, key);
    Tensor h = h_buffer[k];
    AT_DISPATCH_FLOATING_TYPES(key.scalar_type(), "screened_undo", [&] {
      screened_undo<scalar_t>(slot_data.data_ptr<scalar_t>(), grad.data_ptr<scalar_t>(),
                              targets[k].data_ptr<int64_t>(), evicted[k].data_ptr<scalar_t>(),
                              h.data_ptr<scalar_t>(), p, slots, width, hidden, batch);
    });
    if (any_reset[k]) {
      slot_data.copy_(before_reset[--reset_index]);
    }
    Tensor dz_base = lstm ? dz_k.narrow(1, 0, gates).view({batch, 4, hidden})
                          : dz_k.narrow(1, 0, gates);
    dc = base.backward(k, h, dh, dc, dz_base, dc_buffers[k % 2].view({batch, hidden}));
    const bool carried = has_g_y && k > 0;
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      ds = at::mm(dz_k, recurrent).masked_fill_(reset, 0.0);
      if (carried) {
        ds.add_(g_y_or_empty[k - 1]);
      }
      grad.masked_fill_(reset.unsqueeze(2), 0.0);
      if (dc.defined()) {
        dc = dc.masked_fill(reset, 0.0);
      }
    } else if (carried) {
      ds = at::addmm(g_y_or_empty[k - 1], dz_k, recurrent);
    } else {
      ds = at::mm(dz_k, recurrent);
    }
  }
  return {ds, dc.defined() ? dc.clone() : at::empty({0}, key.options())};
}

// --- full attention (rlmem.cells.attention_scan._full_forward / _full_backward) ---------------
//
// A step's window: the first `incoming` slots of the incoming memory, then the chunk's states
// first..end-1 (see _full_forward). Entry i of the window is a row of H numbers in `memory`
// (B, capacity, H) or `chunk` (B, T, H); the attention over it is written out as loops over
// those rows, one pass for what the Python engine does in several ops.

struct Window {
  int64_t incoming, first, end;
  int64_t width() const { return incoming + end - first; }
};

Window window(int64_t k, int64_t n_in, int64_t capacity) {
  const int64_t first = std::max<int64_t>(0, k + 1 - capacity);
  return {first == 0 ? n_in : 0, first, k + 1};
}

// Row i of a step's window for batch item b: an incoming slot, or a state of the chunk.
template <typename T>
inline const T* window_row(const T* slots, const T* chunk, int64_t b, int64_t i,
                           const Window& w, int64_t capacity, int64_t steps, int64_t hidden) {
  return i < w.incoming ? slots + (b * capacity + i) * hidden
                        : chunk + (b * steps + w.first + i - w.incoming) * hidden;
}

template <typename T>
inline T* window_row(T* slots, T* chunk, int64_t b, int64_t i, const Window& w,
                     int64_t capacity, int64_t steps, int64_t hidden) {
  return i < w.incoming ? slots + (b * capacity + i) * hidden
                        : chunk + (b * steps + w.first + i - w.incoming) * hidden;
}

// e[b, i] = σ(q[b] + 2 U_a m_i) over the window, and the logits e_i · 2 v_a plus the mask into
// weights (B, width), which full_attend turns into the softmax.
template <typename T>
void full_pre(const T* query, int64_t query_stride, const T* keys, const T* chunk_keys, T* e,
              const T* score, const T* mask, int64_t mask_stride, int64_t column, T* weights,
              const Window& w, int64_t batch, int64_t capacity, int64_t steps, int64_t hidden) {
  const int64_t width = w.width();
  for (int64_t b = 0; b < batch; ++b) {
    const T* q = query + b * query_stride;
    for (int64_t i = 0; i < width; ++i) {
      const T* key = window_row(keys, chunk_keys, b, i, w, capacity, steps, hidden);
      T* out = e + (b * width + i) * hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        out[h] = q[h] + T(2) * key[h];
      }
      weights[b * width + i] = sigmoid_dot(out, score, hidden) + mask[b * mask_stride + column + i];
    }
  }
}

// The softmax of the logits in weights over the window, and s = h_k + Σ_i w_i m_i.
template <typename T>
void full_attend(T* weights, T* weights_full, int64_t full_stride, int64_t column,
                 const T* memory, const T* chunk, T* y, const Window& w, int64_t k,
                 int64_t batch, int64_t capacity, int64_t steps, int64_t hidden) {
  const int64_t width = w.width();
  for (int64_t b = 0; b < batch; ++b) {
    T* row = weights + b * width;
    softmax_read(row, width, chunk + (b * steps + k) * hidden, y + b * hidden, hidden,
                 [&](int64_t i) {
                   return window_row(memory, chunk, b, i, w, capacity, steps, hidden);
                 });
    std::copy_n(row, width, weights_full + b * full_stride + column);
  }
}

void full_forward(const Tensor& xp, const Tensor& s0, const Tensor& resets,
                  const Tensor& recurrent_t, const Tensor& key_t, const Tensor& score,
                  const Tensor& memory, const Tensor& keys, const Tensor& chunk,
                  const Tensor& chunk_keys, const Tensor& z_in, const Tensor& z,
                  const Tensor& mask, const Tensor& weights_full, const Tensor& y,
                  const Tensor& e_block, const Tensor& w_block, const Tensor& act,
                  const Tensor& partner, const Tensor& minus_one, int64_t n_in, bool save) {
  const int64_t steps = xp.size(0), batch = s0.size(0), hidden = s0.size(1);
  const int64_t capacity = memory.size(1), gates = 4 * hidden, columns = n_in + steps;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{true, save, act, partner, minus_one};
  Tensor z_in_base = z_in.narrow(1, 0, gates), z_out = z;
  const Tensor z_base = z.narrow(1, 0, gates).view({batch, 4, hidden});
  int64_t e_offset = 0, w_offset = 0;
  Tensor s = s0;
  for (int64_t k = 0; k < steps; ++k) {
    const Window w = window(k, n_in, capacity);
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      s = s.masked_fill(reset, 0.0);
      base.reset(k, reset);
    }
    z_in_base.copy_(xp[k]);
    at::addmm_out(z_out, z_in, s, recurrent_t);
    base.forward(k, z_base, chunk.select(1, k));
    Tensor keys_k = chunk_keys.select(1, k);
    at::mm_out(keys_k, chunk.select(1, k), key_t);
    const int64_t width = w.width();
    Tensor e = e_block.narrow(0, e_offset, batch * width * hidden);
    const int64_t column = n_in + w.first - w.incoming;
    AT_DISPATCH_FLOATING_TYPES(xp.scalar_type(), "full_attend", [&] {
      using T = scalar_t;
      full_pre<T>(z.data_ptr<T>() + gates, z.stride(0), keys.data_ptr<T>(),
                  chunk_keys.data_ptr<T>(), e.data_ptr<T>(), score.data_ptr<T>(),
                  mask.data_ptr<T>() + k * batch * columns, columns, column,
                  w_block.data_ptr<T>() + w_offset, w, batch, capacity, steps, hidden);
      full_attend<T>(w_block.data_ptr<T>() + w_offset,
                     weights_full.data_ptr<T>() + k * batch * columns, columns, column,
                     memory.data_ptr<T>(), chunk.data_ptr<T>(),
                     y.data_ptr<T>() + k * batch * hidden, w, k, batch, capacity, steps, hidden);
    });
    if (save) {
      e_offset += batch * width * hidden;
    }
    w_offset += batch * width;
    s = y[k];
  }
}

// The attention's backward at one step: d_weights_i = ds · m_i, the softmax's backward, and
// the gradients of the rows read (d m_i += w_i ds), of the keys (d U_a m_i += 2 v_a ⊙ dp_i),
// of the query (Σ_i 2 v_a ⊙ dp_i) and of the score vector (Σ_i dlogit_i e_i), with
// dp_i = dlogit_i σ'(e_i).
template <typename T>
void full_attend_backward(const T* ds, const T* weights, const T* e, const T* score,
                          const T* memory, const T* chunk, T* d_memory, T* d_keys, T* d_chunk,
                          T* d_chunk_keys, T* d_query, int64_t d_query_stride, T* d_score,
                          T* d_logits, const Window& w, int64_t batch, int64_t capacity,
                          int64_t steps, int64_t hidden) {
  const int64_t width = w.width();
  for (int64_t b = 0; b < batch; ++b) {
    const T* ds_b = ds + b * hidden;
    const T* w_b = weights + b * width;
    T* dl = d_logits + b * width;
    T weighted = 0;
    for (int64_t i = 0; i < width; ++i) {
      const T* m = window_row(memory, chunk, b, i, w, capacity, steps, hidden);
      T* dm = window_row(d_memory, d_chunk, b, i, w, capacity, steps, hidden);
      const T weight = w_b[i];
      T dot = 0;
      #pragma omp simd reduction(+ : dot)
      for (int64_t h = 0; h < hidden; ++h) {
        dot += ds_b[h] * m[h];
        dm[h] += weight * ds_b[h];
      }
      dl[i] = dot;
      weighted += dot * weight;
    }
    T* dq = d_query + b * d_query_stride;
    T* dsc = d_score + b * hidden;
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] = 0;
    }
    for (int64_t i = 0; i < width; ++i) {
      const T d_logit = w_b[i] * (dl[i] - weighted);
      const T* e_i = e + (b * width + i) * hidden;
      T* dk = window_row(d_keys, d_chunk_keys, b, i, w, capacity, steps, hidden);
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        const T dp = d_logit * (T(1) - e_i[h]) * e_i[h];
        dq[h] += dp;
        dk[h] += T(2) * score[h] * dp;
        dsc[h] += d_logit * e_i[h];
      }
    }
    #pragma omp simd
    for (int64_t h = 0; h < hidden; ++h) {
      dq[h] *= score[h];
    }
  }
}

std::tuple<Tensor, Tensor> full_backward(
    const Tensor& g_y_or_empty, const Tensor& g_c_or_empty, const Tensor& resets,
    const Tensor& recurrent, const Tensor& key, const Tensor& score, const Tensor& memory,
    const Tensor& chunk, const Tensor& e_block, const Tensor& w_block, int64_t n_in,
    const Tensor& d_chunk, const Tensor& d_chunk_keys, const Tensor& d_memory,
    const Tensor& d_keys, const Tensor& d_score_rows, const Tensor& dz,
    const Tensor& d_logits, const Tensor& dc_buffers,
    const Tensor& act, const Tensor& partner) {
  const int64_t steps = dz.size(0), batch = dz.size(1), hidden = key.size(0);
  const int64_t capacity = memory.size(1), gates = 4 * hidden;
  const std::vector<bool> any_reset = reset_steps(resets);
  const Base base{true, true, act, partner, Tensor()};
  const bool has_g_y = g_y_or_empty.numel() > 0;
  std::vector<int64_t> e_offsets(steps), w_offsets(steps);
  int64_t e_offset = 0, w_offset = 0;
  for (int64_t k = 0; k < steps; ++k) {
    const int64_t width = window(k, n_in, capacity).width();
    e_offsets[k] = e_offset;
    w_offsets[k] = w_offset;
    e_offset += batch * width * hidden;
    w_offset += batch * width;
  }
  Tensor ds = has_g_y ? g_y_or_empty[steps - 1].contiguous()
                      : at::zeros({batch, hidden}, key.options());
  Tensor dc = g_c_or_empty.numel() > 0 ? g_c_or_empty : Tensor();
  for (int64_t k = steps - 1; k >= 0; --k) {
    const Window w = window(k, n_in, capacity);
    Tensor dz_k = dz[k];
    AT_DISPATCH_FLOATING_TYPES(key.scalar_type(), "full_attend_backward", [&] {
      full_attend_backward<scalar_t>(
          ds.data_ptr<scalar_t>(), w_block.data_ptr<scalar_t>() + w_offsets[k],
          e_block.data_ptr<scalar_t>() + e_offsets[k], score.data_ptr<scalar_t>(),
          memory.data_ptr<scalar_t>(), chunk.data_ptr<scalar_t>(),
          d_memory.data_ptr<scalar_t>(), d_keys.data_ptr<scalar_t>(),
          d_chunk.data_ptr<scalar_t>(), d_chunk_keys.data_ptr<scalar_t>(),
          dz_k.data_ptr<scalar_t>() + gates, dz_k.stride(0), d_score_rows.data_ptr<scalar_t>(),
          d_logits.data_ptr<scalar_t>(), w, batch, capacity, steps, hidden);
    });
    // Every read of h_k happens at steps ≥ k, so its gradient is complete here.
    const Tensor dh = at::addmm(ds.add(d_chunk.select(1, k)), d_chunk_keys.select(1, k), key);
    const Tensor dz_base = dz_k.narrow(1, 0, gates).view({batch, 4, hidden});
    dc = base.backward(k, chunk.select(1, k), dh, dc, dz_base,
                       dc_buffers[k % 2].view({batch, hidden}));
    const bool carried = has_g_y && k > 0;
    if (any_reset[k]) {
      const Tensor reset = resets[k].view({batch, 1});
      ds = at::mm(dz_k, recurrent).masked_fill_(reset, 0.0);
      if (carried) {
        ds.add_(g_y_or_empty[k - 1]);
      }
      if (dc.defined()) {
        dc = dc.masked_fill(reset, 0.0);
      }
    } else if (carried) {
      ds = at::addmm(g_y_or_empty[k - 1], dz_k, recurrent);
    } else {
      ds = at::mm(dz_k, recurrent);
    }
  }
  return {ds, dc.defined() ? dc.clone() : at::empty({0}, key.options())};
}

// MemLSTM's traces in slot order (see _full_forward): the attention each slot's state received
// at each step, and the episode step each slot holds (-1 when empty), from the weights over the
// chunk's entries (T, B, n_in + T), the episode time (T, B), the step each item's episode
// started in the chunk (-1 if before it) and the incoming valid slots.
std::tuple<Tensor, Tensor> full_traces(const Tensor& weights_full, const Tensor& time,
                                       const Tensor& episode_start, const Tensor& valid,
                                       int64_t n_in, int64_t capacity) {
  const int64_t steps = time.size(0), batch = time.size(1), columns = n_in + steps;
  Tensor attention = at::zeros({steps, batch, capacity}, weights_full.options());
  Tensor slot_time = at::empty({steps, batch, capacity}, time.options());
  const Tensor time_rows = time.contiguous(), start_rows = episode_start.contiguous();
  const Tensor valid_rows = valid.contiguous();
  const int64_t* t_data = time_rows.data_ptr<int64_t>();
  const int64_t* start = start_rows.data_ptr<int64_t>();
  const bool* valid_data = valid_rows.data_ptr<bool>();
  int64_t* slot_data = slot_time.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(weights_full.scalar_type(), "full_traces", [&] {
    const scalar_t* w = weights_full.data_ptr<scalar_t>();
    scalar_t* a = attention.data_ptr<scalar_t>();
    for (int64_t k = 0; k < steps; ++k) {
      const Window win = window(k, n_in, capacity);
      for (int64_t b = 0; b < batch; ++b) {
        const scalar_t* w_kb = w + (k * batch + b) * columns;
        scalar_t* a_kb = a + (k * batch + b) * capacity;
        for (int64_t i = 0; i < win.incoming; ++i) {
          a_kb[i] += w_kb[i];
        }
        for (int64_t j = win.first; j < win.end; ++j) {
          const int64_t slot = ((t_data[j * batch + b] % capacity) + capacity) % capacity;
          a_kb[slot] += w_kb[n_in + j];
        }
      }
    }
  });
  for (int64_t k = 0; k < steps; ++k) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t t_kb = t_data[k * batch + b], start_kb = start[k * batch + b];
      const int64_t seen = k + 1 - std::max<int64_t>(start_kb, 0);
      int64_t* out = slot_data + (k * batch + b) * capacity;
      for (int64_t j = 0; j < capacity; ++j) {
        const int64_t age = (((t_kb - j) % capacity) + capacity) % capacity;
        const bool held = age < seen || (start_kb < 0 && valid_data[b * capacity + j]);
        out[j] = held ? t_kb - age : -1;
      }
    }
  }
  return {attention, slot_time};
}

// --- relevancy screening's rollout step (rlmem.cells.relevancy._RelevancyScreening._step) -------

// The state's memory after the screening and the new state: R with the state leaving S (slot 0,
// the oldest) written over its lowest-scored slot if it beats it (a free slot scores -inf, the
// first lowest wins), then S shifted by one with h_t last. memory (B, ν+ρ, H) gets [S, R].
template <typename T>
void screen_step(const T* short_in, const T* short_score, const bool* short_valid,
                 const int64_t* short_time, const T* h, const int64_t* t, T* relevant,
                 T* relevant_score, bool* relevant_valid, int64_t* relevant_time, T* short_out,
                 T* short_score_out, bool* short_valid_out, int64_t* short_time_out, T* memory,
                 int64_t nu, int64_t rho, int64_t hidden, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    T* score_b = relevant_score + b * rho;
    bool* valid_b = relevant_valid + b * rho;
    int64_t lowest = 0;
    T lowest_score = valid_b[0] ? score_b[0] : -std::numeric_limits<T>::infinity();
    for (int64_t j = 1; j < rho; ++j) {
      const T value = valid_b[j] ? score_b[j] : -std::numeric_limits<T>::infinity();
      if (value < lowest_score) {
        lowest_score = value;
        lowest = j;
      }
    }
    if (short_valid[b * nu] && short_score[b * nu] > lowest_score) {
      std::copy_n(short_in + b * nu * hidden, hidden, relevant + (b * rho + lowest) * hidden);
      score_b[lowest] = short_score[b * nu];
      valid_b[lowest] = true;
      relevant_time[b * rho + lowest] = short_time[b * nu];
    }
    std::copy_n(short_in + (b * nu + 1) * hidden, (nu - 1) * hidden, short_out + b * nu * hidden);
    std::copy_n(h + b * hidden, hidden, short_out + (b * nu + nu - 1) * hidden);
    for (int64_t i = 0; i + 1 < nu; ++i) {
      short_score_out[b * nu + i] = short_score[b * nu + i + 1];
      short_valid_out[b * nu + i] = short_valid[b * nu + i + 1];
      short_time_out[b * nu + i] = short_time[b * nu + i + 1];
    }
    short_score_out[b * nu + nu - 1] = 0;
    short_valid_out[b * nu + nu - 1] = true;
    short_time_out[b * nu + nu - 1] = t[b];
    T* memory_b = memory + b * (nu + rho) * hidden;
    std::copy_n(short_out + b * nu * hidden, nu * hidden, memory_b);
    std::copy_n(relevant + b * rho * hidden, rho * hidden, memory_b + nu * hidden);
  }
}

// Attention over [S, R] from e = σ(2 W_a s + 2 b_a + 2 U_a m_i) (B, ν+ρ, H): the weights (into
// attention), s = h + read, the weights added to the scores of S, and the slot times.
template <typename T>
void screened_step_attend(const T* e, const T* score, const T* memory, const T* h,
                          const bool* short_valid, const bool* relevant_valid,
                          const int64_t* short_time, const int64_t* relevant_time, T* attention,
                          T* s, T* short_score, int64_t* slot_time, int64_t nu, int64_t rho,
                          int64_t hidden, int64_t batch) {
  const int64_t slots = nu + rho;
  for (int64_t b = 0; b < batch; ++b) {
    T* w = attention + b * slots;
    for (int64_t i = 0; i < slots; ++i) {
      const bool valid = i < nu ? short_valid[b * nu + i] : relevant_valid[b * rho + i - nu];
      const T* e_i = e + (b * slots + i) * hidden;
      T logit = 0;
      #pragma omp simd reduction(+ : logit)
      for (int64_t k = 0; k < hidden; ++k) {
        logit += e_i[k] * score[k];
      }
      w[i] = valid ? logit : -std::numeric_limits<T>::infinity();
      slot_time[b * slots + i] =
          valid ? (i < nu ? short_time[b * nu + i] : relevant_time[b * rho + i - nu]) : -1;
    }
    softmax_read(w, slots, h + b * hidden, s + b * hidden, hidden,
                 [&](int64_t i) { return memory + (b * slots + i) * hidden; });
    for (int64_t i = 0; i < nu; ++i) {
      short_score[b * nu + i] += w[i];
    }
  }
}

// One step of ReLSTM (c defined) or ReLRNN without autograd, from x_t (B, G) of project_input,
// the state's fields and the engine's weights. Returns the new s, c (empty for the RNN), t, S
// and R fields, and the traces: attention (B, ν+ρ) and slot_time (B, ν+ρ).
std::vector<Tensor> screened_step(const Tensor& x_t, const Tensor& s, const Tensor& c,
                                  const Tensor& t, const Tensor& short_in,
                                  const Tensor& short_score, const Tensor& short_valid,
                                  const Tensor& short_time, const Tensor& relevant_in,
                                  const Tensor& relevant_score_in,
                                  const Tensor& relevant_valid_in,
                                  const Tensor& relevant_time_in, const Tensor& recurrent,
                                  const Tensor& key, const Tensor& score,
                                  const Tensor& query_bias) {
  const int64_t batch = s.size(0), hidden = s.size(1), gates = x_t.size(1);
  const int64_t nu = short_in.size(1), rho = relevant_in.size(1);
  const bool lstm = c.numel() > 0;
  const Tensor recurrent_t = recurrent.t();
  const Tensor z = at::addmm(x_t, s, recurrent_t.narrow(1, 0, gates));
  const Tensor query = at::addmm(query_bias, s, recurrent_t.narrow(1, gates, hidden));
  Tensor h = at::empty({batch, hidden}, s.options());
  Tensor c_new = lstm ? at::empty({batch, hidden}, s.options()) : at::empty({0}, s.options());
  if (lstm) {
    Tensor act = z.sigmoid(), partner = at::empty({batch, 4, hidden}, s.options());
    partner.select(1, 1).copy_(c);
    AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "lstm_cell", [&] {
      lstm_cell<scalar_t>(act.data_ptr<scalar_t>(), partner.data_ptr<scalar_t>(),
                          c_new.data_ptr<scalar_t>(), hidden, batch, hidden);
    });
    partner.select(1, 3).sigmoid_();
    AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "lstm_output", [&] {
      lstm_output<scalar_t>(act.data_ptr<scalar_t>(), partner.data_ptr<scalar_t>(),
                            h.data_ptr<scalar_t>(), hidden, batch, hidden);
    });
  } else {
    at::sigmoid_out(h, z).mul_(2.0).sub_(1.0);
  }
  const Tensor short_rows = short_in.contiguous(), short_scores = short_score.contiguous();
  const Tensor short_valids = short_valid.contiguous(), short_times = short_time.contiguous();
  Tensor relevant = relevant_in.clone(at::MemoryFormat::Contiguous);
  Tensor relevant_score = relevant_score_in.clone(at::MemoryFormat::Contiguous);
  Tensor relevant_valid = relevant_valid_in.clone(at::MemoryFormat::Contiguous);
  Tensor relevant_time = relevant_time_in.clone(at::MemoryFormat::Contiguous);
  Tensor short_out = at::empty_like(short_rows), short_score_out = at::empty_like(short_scores);
  Tensor short_valid_out = at::empty_like(short_valids);
  Tensor short_time_out = at::empty_like(short_times);
  Tensor memory = at::empty({batch, nu + rho, hidden}, s.options());
  const Tensor t_rows = t.contiguous();
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "screen_step", [&] {
    using T = scalar_t;
    screen_step<T>(short_rows.data_ptr<T>(), short_scores.data_ptr<T>(),
                   short_valids.data_ptr<bool>(), short_times.data_ptr<int64_t>(),
                   h.data_ptr<T>(), t_rows.data_ptr<int64_t>(), relevant.data_ptr<T>(),
                   relevant_score.data_ptr<T>(), relevant_valid.data_ptr<bool>(),
                   relevant_time.data_ptr<int64_t>(), short_out.data_ptr<T>(),
                   short_score_out.data_ptr<T>(), short_valid_out.data_ptr<bool>(),
                   short_time_out.data_ptr<int64_t>(), memory.data_ptr<T>(), nu, rho, hidden,
                   batch);
  });
  Tensor e = at::matmul(memory, key.t());
  e.add_(query.unsqueeze(1)).sigmoid_();
  Tensor attention = at::empty({batch, nu + rho}, s.options());
  Tensor slot_time = at::empty({batch, nu + rho}, t.options());
  Tensor s_new = at::empty({batch, hidden}, s.options());
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "screened_step_attend", [&] {
    using T = scalar_t;
    screened_step_attend<T>(e.data_ptr<T>(), score.data_ptr<T>(), memory.data_ptr<T>(),
                            h.data_ptr<T>(), short_valid_out.data_ptr<bool>(),
                            relevant_valid.data_ptr<bool>(), short_time_out.data_ptr<int64_t>(),
                            relevant_time.data_ptr<int64_t>(), attention.data_ptr<T>(),
                            s_new.data_ptr<T>(), short_score_out.data_ptr<T>(),
                            slot_time.data_ptr<int64_t>(), nu, rho, hidden, batch);
  });
  return {s_new, c_new, t.add(1), short_out, short_score_out, short_valid_out, short_time_out,
          relevant, relevant_score, relevant_valid, relevant_time, attention, slot_time};
}

// Over the used slots [0, used) of (B, capacity, H) keys U_a m: the logits
// σ(2 W_a s + 2 b_a + 2 U_a m_i) · 2 v_a into attention (B, capacity), -inf on an invalid slot;
// e (H numbers) is scratch.
template <typename T>
void full_step_pre(const T* query, const T* keys, const T* score, const bool* valid, T* e,
                   T* attention, int64_t used, int64_t capacity, int64_t hidden,
                   int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    const T* q = query + b * hidden;
    for (int64_t i = 0; i < used; ++i) {
      const T* key = keys + (b * capacity + i) * hidden;
      #pragma omp simd
      for (int64_t h = 0; h < hidden; ++h) {
        e[h] = q[h] + T(2) * key[h];
      }
      const T logit = sigmoid_dot(e, score, hidden);
      attention[b * capacity + i] = valid[b * capacity + i]
                                        ? logit : -std::numeric_limits<T>::infinity();
    }
  }
}

// The softmax of the logits over the used slots in attention (B, capacity), in place, and
// s = h + Σ_i w_i m_i.
template <typename T>
void full_step_attend(const T* memory, const T* h, T* attention, T* s, int64_t used,
                      int64_t capacity, int64_t hidden, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b) {
    softmax_read(attention + b * capacity, used, h + b * hidden, s + b * hidden, hidden,
                 [&](int64_t i) { return memory + (b * capacity + i) * hidden; });
  }
}

// --- MemLSTM's rollout step (rlmem.cells.memlstm.MemLSTM._step, without autograd) -------------

// One step of MemLSTM attending over the slots [0, used): the caller guarantees that no batch
// item holds a state beyond them. x_t (B, 4H) is a step of project_input; recurrent (4H + H, H)
// is [W_hh; 2 W_a] (g rows doubled), key 2 U_a, score 2 v_a. memory_new and keys_new
// (B, capacity, H) receive the new memory and keys (blocks the caller recycles: fresh ones of
// that size cost page faults), and hold zeros from slot `used` on. Returns s, c, t, valid,
// the attention (B, capacity) and the slot times.
std::vector<Tensor> full_step(const Tensor& x_t, const Tensor& s, const Tensor& c,
                              const Tensor& t, const Tensor& memory, const Tensor& keys,
                              const Tensor& valid, const Tensor& recurrent, const Tensor& key,
                              const Tensor& score, const Tensor& query_bias, int64_t used,
                              const Tensor& memory_new, const Tensor& keys_new) {
  const int64_t batch = s.size(0), hidden = s.size(1), capacity = memory.size(1);
  const int64_t gates = 4 * hidden;
  const Tensor recurrent_t = recurrent.t();
  const Tensor z = at::addmm(x_t, s, recurrent_t.narrow(1, 0, gates));
  const Tensor query = at::addmm(query_bias, s, recurrent_t.narrow(1, gates, hidden));
  // The LSTM step in the doubled form (LSTMBase.step_doubled).
  const Tensor act = z.sigmoid();
  const Tensor i = act.narrow(1, 0, hidden), f = act.narrow(1, hidden, hidden),
               g = act.narrow(1, 2 * hidden, hidden), o = act.narrow(1, 3 * hidden, hidden);
  const Tensor c_new = f.mul(c).add_(i.mul(g.mul(2.0).sub_(1.0)));
  const Tensor h = o.mul(c_new.mul(2.0).sigmoid_().mul_(2.0).sub_(1.0));
  // Slots from `used` on are empty, hence zero, in memory and keys and in the blocks the
  // caller passes (Workspace.take_unshared with rows=used): only the slots in use are copied,
  // O(t) per step rather than O(capacity).
  memory_new.narrow(1, 0, used).copy_(memory.narrow(1, 0, used));
  keys_new.narrow(1, 0, used).copy_(keys.narrow(1, 0, used));
  const Tensor new_keys = at::mm(h, key.mul(0.5).t());
  const Tensor steps = t.contiguous(), rows_h = h.contiguous();
  const Tensor valid_new = valid.clone(at::MemoryFormat::Contiguous);
  Tensor slot_time = at::empty({batch, capacity}, t.options());
  Tensor pre = at::empty({hidden}, s.options());
  Tensor attention = at::zeros({batch, capacity}, s.options());
  Tensor s_new = at::empty({batch, hidden}, s.options());
  const Tensor queries = query.contiguous();
  const int64_t* step = steps.data_ptr<int64_t>();
  bool* valid_rows = valid_new.data_ptr<bool>();
  int64_t* times = slot_time.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(s.scalar_type(), "full_step_attend", [&] {
    using T = scalar_t;
    // h_t and U_a h_t go into slot t mod capacity; slot j then holds the most recent step
    // ≡ j (mod capacity) that is ≤ t (-1 when empty), for the traces.
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t slot = step[b] % capacity, row = b * capacity + slot;
      std::copy_n(rows_h.data_ptr<T>() + b * hidden, hidden,
                  memory_new.data_ptr<T>() + row * hidden);
      std::copy_n(new_keys.data_ptr<T>() + b * hidden, hidden,
                  keys_new.data_ptr<T>() + row * hidden);
      valid_rows[row] = true;
      int64_t back = slot;  // (t - j) mod capacity, from j = 0 on
      for (int64_t j = 0; j < capacity; ++j) {
        times[b * capacity + j] = valid_rows[b * capacity + j] ? step[b] - back : -1;
        back = back == 0 ? capacity - 1 : back - 1;
      }
    }
    // Additive attention over the used slots (AdditiveAttention.attend_doubled, key_scale 2).
    full_step_pre<T>(queries.data_ptr<T>(), keys_new.data_ptr<T>(), score.data_ptr<T>(),
                     valid_rows, pre.data_ptr<T>(), attention.data_ptr<T>(), used, capacity,
                     hidden, batch);
    full_step_attend<T>(memory_new.data_ptr<T>(), rows_h.data_ptr<T>(),
                        attention.data_ptr<T>(), s_new.data_ptr<T>(), used, capacity, hidden,
                        batch);
  });
  return {s_new, c_new, t.add(1), valid_new, attention, slot_time};
}

// How many tensors share the storage of this one (1: only this one).
int64_t storage_use_count(const Tensor& tensor) {
  return static_cast<int64_t>(tensor.storage().use_count());
}

}  // namespace

TORCH_LIBRARY(rlmem_loops, m) {
  m.def("tarnn_forward", &tarnn_forward);
  m.def("tarnn_backward", &tarnn_backward);
  m.def("screened_forward", &screened_forward);
  m.def("screened_backward", &screened_backward);
  m.def("full_forward", &full_forward);
  m.def("full_backward", &full_backward);
  m.def("full_traces", &full_traces);
  m.def("full_step", &full_step);
  m.def("screened_step", &screened_step);
  m.def("storage_use_count", &storage_use_count);
}
